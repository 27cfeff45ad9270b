package exchange

import (
	"os"
	"testing"

	"github.com/pmixbus/pmixbus/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.LaunchMain(m)) }
