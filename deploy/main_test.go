package deploy

import (
	"os"
	"testing"

	"github.com/tenure-dev/tenure/internal/testenv"
)

// TestMain fails the run if a test leaves goroutines behind (the embedded
// etcd, the HA node).
func TestMain(m *testing.M) { os.Exit(testenv.CheckLeaks(m.Run())) }
