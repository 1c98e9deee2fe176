package trace_test

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/orwl-go/orwl/fifo"
	"github.com/orwl-go/orwl/trace"
)

// The runtime records, for each task, its requests, waits, sections and
// releases; a release's flow id travels with the grant it causes, here from
// a task of process 0 to a task of process 1. Each process writes its part
// and rank 0 merges them.
func Example() {
	p0, p1 := trace.New(0), trace.New(1)
	// p1.SetClockOffset(d) with d measured against rank 0 at start.

	block := trace.Loc{Task: 0, Name: "block"}
	writer := p0.TaskTrack(0) // once per task; keep the pointer
	reader := p1.TaskTrack(1)

	barrier := p0.BeginBarrier("schedule")
	barrier.End()

	// Task 1 (process 1) requests a read of block@0 and waits for it.
	reader.Request(block, fifo.Read, 1)
	wait := reader.BeginWait(block, fifo.Read, 1)

	// Task 0 (process 0) writes block@0 and releases it.
	writer.Request(block, fifo.Write, 0)
	writer.Grant(block, fifo.Write, 0)
	sec := writer.BeginSection(block, fifo.Write)
	sec.End()
	flow := writer.Release(block, fifo.Write) // sent with the grant message

	// Process 0 pushes the data; process 1 receives it and grants task 1.
	out := writer.BeginTransfer(block, trace.Out, 1, 8<<10)
	out.End()
	in := reader.BeginTransfer(block, trace.In, 0, 8<<10)
	in.End()
	reader.Grant(block, fifo.Read, flow)
	wait.End()
	sec = reader.BeginSection(block, fifo.Read)
	sec.End()
	reader.Release(block, fifo.Read)

	// At the end: every process sends rank 0 its part; rank 0 merges.
	merged, err := trace.Merge([][]byte{p0.Part(), p1.Part()})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("valid:", merged.Validate() == nil)
	fmt.Println("tasks:", merged.Tasks())

	var js bytes.Buffer
	merged.WriteJSON(&js) // open in https://ui.perfetto.dev, or draw with package gantt
	fmt.Println("json:", strings.HasPrefix(js.String(), `{"traceEvents":[`))
	var sum strings.Builder
	trace.Summarize(&sum, merged) // print it at the end of a traced run
	fmt.Println("summary names the wait:", strings.Contains(sum.String(), "block@0"))
	// Output:
	// valid: true
	// tasks: [{0 0} {1 1}]
	// json: true
	// summary names the wait: true
}
