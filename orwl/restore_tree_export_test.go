package orwl

// TreeChildren returns rank r's children in the job's tree of procs processes.
var TreeChildren = treeChildren
