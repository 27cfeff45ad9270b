package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/pmixbus/pmixbus/pmix"
)

// streamFrames is a stream of frames of every size class a Reader handles
// differently: within its small buffer, across it, within a borrowed
// buffer, and larger than one.
func streamFrames() []*Frame {
	var out []*Frame
	for i, size := range []int{0, 10, 400, 500, 600, 3000, 60 << 10, 70 << 10, 1 << 20, 0, 5, 200} {
		for j := range 3 {
			out = append(out, &Frame{Type: TypeInvoke, Seq: uint64(i*10 + j), Name: strings.Repeat("n", size),
				Info: []pmix.Info{pmix.NewInfo("k", pmix.Uint32(uint32(j)))}})
		}
	}
	return out
}

func encodeStream(t testing.TB, frames []*Frame) []byte {
	t.Helper()
	var b []byte
	for _, f := range frames {
		var err error
		if b, err = AppendFrame(b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// chunkReader returns the stream in chunks of random sizes.
type chunkReader struct {
	b   []byte
	rnd *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.rnd.IntN(2000))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

func TestReaderStream(t *testing.T) {
	frames := streamFrames()
	stream := encodeStream(t, frames)
	for name, src := range map[string]func() io.Reader{
		"whole":      func() io.Reader { return bytes.NewReader(stream) },
		"one byte":   func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"half":       func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
		"data+EOF":   func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
		"chunks":     func() io.Reader { return &chunkReader{b: stream, rnd: rand.New(rand.NewPCG(1, 2))} },
		"timeouts":   func() io.Reader { return iotest.TimeoutReader(bytes.NewReader(stream)) },
		"big chunks": func() io.Reader { return &chunkReader{b: stream, rnd: rand.New(rand.NewPCG(3, 4))} },
	} {
		t.Run(name, func(t *testing.T) {
			r := NewReader(src(), DefaultMaxFrame)
			for i, want := range frames {
				got, err := r.ReadFrame()
				if errors.Is(err, iotest.ErrTimeout) {
					got, err = r.ReadFrame() // a timeout is not sticky
				}
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !framesEqual(want, got) {
					t.Fatalf("frame %d: got seq %d, name of %d bytes; want seq %d, %d bytes", i, got.Seq, len(got.Name), want.Seq, len(want.Name))
				}
			}
			if _, err := r.ReadFrame(); err != io.EOF {
				t.Fatalf("after the last frame: %v, want io.EOF", err)
			}
			if r.borrowed != nil {
				t.Error("the reader kept a borrowed buffer at the end of the stream")
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	frame := encodeStream(t, []*Frame{{Type: TypeFinalize, Seq: 1}})
	var big [4]byte
	binary.BigEndian.PutUint32(big[:], 1<<30)
	garbage := []byte{0, 0, 0, 2, 0xc1, 0xc1} // a whole frame that does not decode
	for name, tc := range map[string]struct {
		stream []byte
		want   error
	}{
		"empty":          {nil, io.EOF},
		"in the length":  {frame[:2], io.ErrUnexpectedEOF},
		"in the body":    {frame[:len(frame)-1], io.ErrUnexpectedEOF},
		"too large":      {big[:], ErrFrameTooLarge},
		"not decodable":  {garbage, pmix.ErrUnpackFailure},
		"a reader error": {nil, iotest.ErrTimeout},
	} {
		t.Run(name, func(t *testing.T) {
			var src io.Reader = bytes.NewReader(tc.stream)
			if tc.want == iotest.ErrTimeout {
				src = iotest.ErrReader(iotest.ErrTimeout)
			}
			r := NewReader(src, DefaultMaxFrame)
			if _, err := r.ReadFrame(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// A frame that does not decode was read whole: the next one reads.
	r := NewReader(bytes.NewReader(append(garbage, frame...)), DefaultMaxFrame)
	if _, err := r.ReadFrame(); !errors.Is(err, pmix.ErrUnpackFailure) {
		t.Fatalf("garbage: %v", err)
	}
	if f, err := r.ReadFrame(); err != nil || f.Type != TypeFinalize {
		t.Fatalf("after garbage: %+v %v", f, err)
	}
	if _, err := NewReader(zeroReader{}, DefaultMaxFrame).ReadFrame(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("a reader that returns nothing: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestIdleReadersHoldLittle: readers that have read a burst, a frame larger
// than a borrowed buffer, and then nothing more — an agent's attached
// clients between events — hold their small buffer only.
func TestIdleReadersHoldLittle(t *testing.T) {
	const readers = 1000
	burst := encodeStream(t, streamFrames()[:24]) // up to 70 KiB frames
	base := liveHeap()
	rs := make([]*Reader, readers)
	for i := range rs {
		rs[i] = NewReader(io.MultiReader(bytes.NewReader(burst), blockingReader{}), DefaultMaxFrame)
		for range 24 {
			if _, err := rs[i].ReadFrame(); err != nil {
				t.Fatal(err)
			}
		}
	}
	per := (liveHeap() - base) / readers
	if per > 2<<10 {
		t.Errorf("an idle reader holds %d bytes", per)
	}
	t.Logf("an idle reader holds %d bytes", per)
	for _, r := range rs {
		if r.borrowed != nil || len(r.buf) != smallRead {
			t.Fatal("an idle reader kept a large buffer")
		}
	}
}

// blockingReader stands for a socket with nothing to read; never read in
// TestIdleReadersHoldLittle.
type blockingReader struct{}

func (blockingReader) Read([]byte) (int, error) { panic("read past the burst") }

func FuzzReader(f *testing.F) {
	f.Add(encodeStream(f, streamFrames()[:12]), uint64(1))
	for _, fr := range sampleFrames() {
		f.Add(encodeStream(f, []*Frame{fr, fr}), uint64(7))
	}
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		// The Reader reads, in chunks, what ReadFrame reads whole.
		want := bytes.NewReader(b)
		r := NewReader(&chunkReader{b: b, rnd: rand.New(rand.NewPCG(seed, seed))}, 1<<16)
		for i := 0; ; i++ {
			wf, werr := ReadFrame(want, 1<<16)
			gf, gerr := r.ReadFrame()
			if (werr == nil) != (gerr == nil) || pmix.StatusOf(werr) != pmix.StatusOf(gerr) {
				t.Fatalf("frame %d: ReadFrame gave %v, the Reader %v", i, werr, gerr)
			}
			if werr != nil {
				if errors.Is(werr, io.EOF) != errors.Is(gerr, io.EOF) || errors.Is(werr, io.ErrUnexpectedEOF) != errors.Is(gerr, io.ErrUnexpectedEOF) {
					t.Fatalf("frame %d: ReadFrame gave %v, the Reader %v", i, werr, gerr)
				}
				if !undecodable(werr) {
					return
				}
				continue
			}
			if !framesEqual(wf, gf) {
				t.Fatalf("frame %d differs:\n%+v\n%+v", i, wf, gf)
			}
		}
	})
}

// undecodable reports an error after which both readers are still at a
// frame boundary: the body was read, its content was wrong.
func undecodable(err error) bool {
	return errors.Is(err, pmix.ErrUnpackFailure) && !errors.Is(err, ErrFrameTooLarge)
}

// TestIdleWriterHoldsNoBuffer: once what was queued is written, a Writer
// holds no buffer.
func TestIdleWriterHoldsNoBuffer(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	for round := range 3 {
		w.Cork()
		for i := range 100 {
			if err := w.WriteFrame(&Frame{Type: TypeInvokeDone, Seq: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Uncork(); err != nil {
			t.Fatal(err)
		}
		if w.held != nil || w.buf != nil {
			t.Fatalf("round %d: an idle writer holds %d bytes", round, cap(w.buf))
		}
	}
	r := NewReader(&out, DefaultMaxFrame)
	for i := range 300 {
		if f, err := r.ReadFrame(); err != nil || f.Seq != uint64(i%100) {
			t.Fatalf("frame %d: %+v %v", i, f, err)
		}
	}
}

// batchSource is a socket whose peer writes batches of frames: a Read
// returns at most what is left of the current batch, as a read system
// call does. It counts the reads.
type batchSource struct {
	batch []byte
	left  []byte
	reads int
}

func (s *batchSource) Read(p []byte) (int, error) {
	if len(s.left) == 0 {
		s.left = s.batch
	}
	n := copy(p, s.left)
	s.left = s.left[n:]
	s.reads++
	return n, nil
}

// BenchmarkReader reads completions (invoke-done frames) that arrive one
// at a time, as on the latency path, and in batches of 256, as a client's
// corked burst: per frame, the time and allocations of reading and
// decoding, and the reads (system calls on a socket) it takes.
func BenchmarkReader(b *testing.B) {
	done := &Frame{Type: TypeInvokeDone, Seq: 123456, Status: pmix.EventNoActionTaken}
	for _, batch := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			var frames []*Frame
			for range batch {
				frames = append(frames, done)
			}
			src := &batchSource{batch: encodeStream(b, frames)}
			r := NewReader(src, DefaultMaxFrame)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := r.ReadFrame(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(src.reads)/float64(b.N), "reads/frame")
		})
	}
}
