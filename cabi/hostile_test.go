package cabi

import (
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/proto"
)

// TestHostileAgent attaches testdata/lost.c to a fake agent that answers
// the hello and the registration, then sends bytes no agent sends: the
// library raises PMIX_ERR_COMM_FAILURE and PMIX_ERR_LOST_CONNECTION in the
// process's own handlers (or only the latter when the socket just closes),
// fails what is asked afterwards, and finalizes; it never crashes.
func TestHostileAgent(t *testing.T) {
	frame := func(body []byte) []byte {
		return binary.BigEndian.AppendUint32(nil, uint32(len(body))) // then body
	}
	cases := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"not a map", append(frame([]byte{1, 2, 3}), 1, 2, 3), "event -49\nevent -61\n"},
		{"string longer than the frame", append(frame(make([]byte, 8)), 0x81, 0xa1, 't', 0xdb, 0xff, 0xff, 0xff, 0xf0), "event -49\nevent -61\n"},
		{"array count beyond the bytes", append(frame(make([]byte, 13)),
			0x82, 0xa1, 't', 0x18, 0xa2, 'i', 'v', 0xdd, 0x7f, 0xff, 0xff, 0xff, 0x90), "event -49\nevent -61\n"},
		{"over the frame limit", []byte{0x7f, 0xff, 0xff, 0xff, 0x80}, "event -49\nevent -61\n"},
		{"nested too deep", nested(40), "event -49\nevent -61\n"},
		{"closed", nil, "event -61\n"},
	}
	bin := compile(t, "lost.c", headers(t)[0], true)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "agent.sock")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go fakeAgent(t, l, tc.bytes)
			out := run(t, testContext(t), bin, map[string]string{
				"PMIX_NAMESPACE": "hostile", "PMIX_RANK": "0",
				"PMIXBUS_AGENT": "unix:" + sock, "PMIXBUS_CREDENTIAL": "x",
			})
			want := "init 0\nregistered 1\n" + tc.want + "fence -61\nfinalize 0\n"
			if out != want {
				t.Errorf("output:\n%s\nwant:\n%s", out, want)
			}
		})
	}
}

// nested is an invoke-batch whose one entry's info nests info arrays
// depth deep.
func nested(depth int) []byte {
	var info []byte
	for range depth {
		info = append([]byte{0x91, 0x93, 0xa1, 'k', 0x00, 0x92, 24}, info...)
	}
	info = append(info, 0x90)
	entry := append([]byte{0x97, 1, 1, 0xa1, 'h', 0xd0, 0xf0, 0xc0}, info...)
	entry = append(entry, 0x90)
	body := append([]byte{0x82, 0xa1, 't', 24, 0xa2, 'i', 'v', 0x91}, entry...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// fakeAgent serves one client: hello, one registration, then raw.
func fakeAgent(t *testing.T, l net.Listener, raw []byte) {
	serveOne(l, func(conn net.Conn, w *proto.Writer, f *proto.Frame) bool {
		switch f.Type {
		case proto.TypeHello:
			writeHello(w, f)
		case proto.TypeRegister:
			_ = w.WriteFrame(&proto.Frame{Type: proto.TypeReply, Seq: f.Seq, ID: 7})
			_ = w.Flush()
			if raw != nil {
				_, _ = conn.Write(raw)
			}
			if !strings.Contains(t.Name(), "closed") {
				// keep the connection: the client must end it itself
				_, _ = conn.Read(make([]byte, 1))
			}
			return false
		}
		return w.Flush() == nil
	})
}

// serveOne accepts one connection on l and hands each frame read from it
// to serve, with the connection and a writer on it, until serve returns
// false or the connection ends; then it closes the connection.
func serveOne(l net.Listener, serve func(conn net.Conn, w *proto.Writer, f *proto.Frame) bool) {
	conn, err := l.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	r, w := proto.NewReader(conn, proto.DefaultMaxFrame), proto.NewWriter(conn)
	for {
		f, err := r.ReadFrame()
		if err != nil || !serve(conn, w, f) {
			return
		}
	}
}
