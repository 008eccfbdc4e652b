package protocol

import (
	"strings"
	"time"

	"github.com/minidubbo/minidubbo/status"
)

// KeyTimeoutSource names, on a consumer's copy of a provider URL, the
// setting behind the "timeout" parameter; "{method}.timeout.source" does
// the same for "{method}.timeout". Values are those of TimeoutSourceValue
// ("reference", "method", "default"); without one, the value is the one
// the provider advertised. The parameter is the consumer's own: it is
// never registered nor sent to the provider. Errors use it to say which
// setting timed a call out (status.TimeoutError).
const KeyTimeoutSource = "timeout.source"

var timeoutSources = [...]string{
	status.SourceContext:   "context",
	status.SourceMethod:    "method",
	status.SourceReference: "reference",
	status.SourceProvider:  "provider",
	status.SourceDefault:   "default",
}

// TimeoutSourceValue returns the KeyTimeoutSource value for s, such as
// "reference"; "" for status.SourceUnknown.
func TimeoutSourceValue(s status.Source) string {
	if int(s) < len(timeoutSources) {
		return timeoutSources[s]
	}
	return ""
}

func parseTimeoutSource(v string) status.Source {
	for i, name := range timeoutSources {
		if name != "" && name == v {
			return status.Source(i)
		}
	}
	return status.SourceProvider
}

// TimeoutOf returns the timeout for a call of method and the setting it
// comes from: the parameter "{method}.timeout" if set, else "timeout",
// else DefaultTimeout (status.SourceDefault). A value that is not a
// positive integer is skipped; one too large for a Duration saturates. A context deadline sooner
// than the result still ends the call first; the protocol sees to that.
func (u *URL) TimeoutOf(method string) (time.Duration, status.Source) {
	for _, k := range [...]string{method + "." + KeyTimeout, KeyTimeout} {
		if strings.HasPrefix(k, ".") {
			continue
		}
		if ms := u.intOr(k, -1); ms > 0 {
			return millis(ms), parseTimeoutSource(u.Param(k+".source", ""))
		}
	}
	return DefaultTimeout, status.SourceDefault
}
