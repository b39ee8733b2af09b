package harness

import (
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestWritePlot draws a report of synthetic distributions and checks that the
// result is a PNG of the intended size. HOMELOCK_PLOT=FILE keeps it, to look
// at.
func TestWritePlot(t *testing.T) {
	r := newReport()
	r.Settings.Repeat = 3
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name     string
		medianNs float64
		sigma    float64
		n        int
	}{
		{"repeat lock+unlock", 290, 0.3, 100000},
		{"gRPC unary round trip", 45000, 0.4, 3000},
		{"first lock, remote home", 55000, 0.5, 3000},
		{"first lock, local home", 6000, 0.4, 3000},
		{"hot key wait", 3e6, 1.2, 20000},
		{"64 keys, lock and write", 1.5e6, 1.0, 20000},
	} {
		h := newHist()
		for range c.n {
			_ = h.RecordValue(int64(c.medianNs * math.Exp(c.sigma*rng.NormFloat64())))
		}
		r.recordLatency(c.name, h)
	}
	r.record("repeat_lock_ns_p50", 290)
	r.record("grpc_unary_us_p50", 45)
	r.record("first_lock_remote_us_p50", 55)
	r.finish(phaseList(DefaultOptions()))
	if len(r.marks) != 2 {
		t.Errorf("%d targets marked, want 2 (repeat lock, first lock)", len(r.marks))
	}
	path := os.Getenv("HOMELOCK_PLOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "latency.png")
	}
	if err := r.WritePlot(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 400 {
		t.Errorf("plot is %v, want a readable size", b)
	}
}
