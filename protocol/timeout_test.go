package protocol_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/minidubbo/minidubbo/protocol"
	"github.com/minidubbo/minidubbo/status"
)

func TestTimeoutOf(t *testing.T) {
	u := protocol.NewURL("dubbo", "127.0.0.1", 20880, "demo.Greeter", nil)
	for _, c := range []struct {
		params map[string]string
		method string
		d      time.Duration
		src    status.Source
	}{
		{nil, "Get", time.Second, status.SourceDefault},
		{map[string]string{"timeout": "2000"}, "Get", 2 * time.Second, status.SourceProvider},
		{map[string]string{"timeout": "2000", "timeout.source": "reference"}, "Get", 2 * time.Second, status.SourceReference},
		{map[string]string{"timeout": "1000", "timeout.source": "default"}, "Get", time.Second, status.SourceDefault},
		{map[string]string{"timeout": "2000", "timeout.source": "reference", "Get.timeout": "300"}, "Get", 300 * time.Millisecond, status.SourceProvider},
		{map[string]string{"timeout": "2000", "Get.timeout": "300", "Get.timeout.source": "method"}, "Get", 300 * time.Millisecond, status.SourceMethod},
		{map[string]string{"timeout": "2000", "Get.timeout": "300", "Get.timeout.source": "method"}, "Put", 2 * time.Second, status.SourceProvider},
		{map[string]string{"timeout": "-5"}, "", time.Second, status.SourceDefault},
	} {
		v := u
		for k, val := range c.params {
			v = v.With(k, val)
		}
		d, src := v.TimeoutOf(c.method)
		assert.Equal(t, c.d, d, "%v", c.params)
		assert.Equal(t, c.src, src, "%v %s", c.params, src)
	}
	assert.Equal(t, "reference", protocol.TimeoutSourceValue(status.SourceReference))
	assert.Equal(t, "", protocol.TimeoutSourceValue(status.SourceUnknown))
}
