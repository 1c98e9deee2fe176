module github.com/orwl-go/orwl

go 1.26.0

require (
	github.com/ebitengine/purego v0.11.3
	github.com/gorilla/websocket v1.5.3
	github.com/vmihailenco/msgpack/v5 v5.4.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
	gonum.org/v1/gonum v0.17.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/kr/text v0.2.0 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)
