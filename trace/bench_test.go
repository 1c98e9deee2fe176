package trace

import (
	"testing"

	"github.com/orwl-go/orwl/fifo"
)

// BenchmarkRecord measures the cost of recording with tracing on: one
// instant (a request) and one span (a section, two clock reads).
func BenchmarkRecord(b *testing.B) {
	l := Loc{Task: 1, Name: "block"}
	b.Run("request", func(b *testing.B) {
		tr := New(0).TaskTrack(0)
		b.ReportAllocs()
		for b.Loop() {
			tr.Request(l, fifo.Read, 3)
		}
	})
	b.Run("section", func(b *testing.B) {
		tr := New(0).TaskTrack(0)
		b.ReportAllocs()
		for b.Loop() {
			tr.BeginSection(l, fifo.Write).End()
		}
	})
	b.Run("release+grant", func(b *testing.B) {
		r := New(0)
		a, c := r.TaskTrack(0), r.TaskTrack(1)
		b.ReportAllocs()
		for b.Loop() {
			c.Grant(l, fifo.Read, a.Release(l, fifo.Write))
		}
	})
	b.Run("parallel-tasks", func(b *testing.B) {
		// Every goroutine records on its own track: no shared lock.
		r := New(0)
		var next int64
		var mu = make(chan struct{}, 1)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			mu <- struct{}{}
			next++
			tr := r.TaskTrack(int(next))
			<-mu
			for pb.Next() {
				tr.Request(l, fifo.Read, 3)
			}
		})
	})
}

// BenchmarkRecordOff measures tracing off: the same calls on a nil recorder.
func BenchmarkRecordOff(b *testing.B) {
	var r *Recorder
	tr := r.TaskTrack(0)
	l := Loc{Task: 1, Name: "block"}
	b.Run("request", func(b *testing.B) {
		for b.Loop() {
			tr.Request(l, fifo.Read, 3)
		}
	})
	b.Run("section", func(b *testing.B) {
		for b.Loop() {
			tr.BeginSection(l, fifo.Write).End()
		}
	})
}
