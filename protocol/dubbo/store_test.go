package dubbo

import "strings"

// storeForTest publishes services built by a test, each found by its
// key (group/interface:version), as export does.
func (s *server) storeForTest(m map[string]*exported) {
	for key, e := range m {
		if e.id != (serviceID{}) {
			continue
		}
		if i := strings.IndexByte(key, '/'); i >= 0 {
			e.id.group, key = key[:i], key[i+1:]
		}
		if i := strings.IndexByte(key, ':'); i >= 0 {
			e.id.version, key = key[i+1:], key[:i]
		}
		e.id.service = key
	}
	s.store(m)
}
