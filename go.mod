module github.com/minidubbo/minidubbo

go 1.26

require (
	github.com/HdrHistogram/hdrhistogram-go v1.2.0
	github.com/go-zookeeper/zk v1.0.4
	github.com/stretchr/testify v1.12.1
	github.com/vmihailenco/msgpack/v5 v5.4.1
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
