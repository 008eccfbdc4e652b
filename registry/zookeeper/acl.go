package zookeeper

import (
	"errors"
	"path"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// strangerPerms are the permissions that let whoever holds them change a
// node or what is under it: write its data, create or delete children,
// change its ACL.
const strangerPerms = zk.PermWrite | zk.PermCreate | zk.PermDelete | zk.PermAdmin

// ExposedNode is an existing node the registry uses (the root, a service,
// category or providers node) whose ACL lets anyone write it, create or
// delete its children, or change its ACL: a stranger could add providers,
// routing rules or remove registrations there. Only reported when the
// registry's own ACL is closed (credentials given); the registry does not
// change the ACL of a node it did not create.
type ExposedNode struct {
	Path string
	ACL  []zk.ACL
}

// defaultACL is the ACL of created nodes: Options.ACL, else full rights
// for the digest identity plus read for anyone (unless PrivateRead), else
// world-open.
func defaultACL(o Options) []zk.ACL {
	switch {
	case o.ACL != nil:
		return o.ACL
	case o.Username != "":
		acl := zk.DigestACL(zk.PermAll, o.Username, o.Password)
		if !o.PrivateRead {
			acl = append(acl, zk.WorldACL(zk.PermRead)...)
		}
		return acl
	default:
		return zk.WorldACL(zk.PermAll)
	}
}

// strangerMay reports whether acl lets an unauthenticated client change
// the node: world:anyone or an ip entry for every address with write,
// create, delete or admin rights.
func strangerMay(acl []zk.ACL) bool {
	for _, a := range acl {
		if a.Perms&strangerPerms == 0 {
			continue
		}
		switch {
		case a.Scheme == "world" && a.ID == "anyone":
			return true
		case a.Scheme == "ip" && (a.ID == "0.0.0.0/0" || a.ID == "::/0" || a.ID == "0:0:0:0:0:0:0:0/0"):
			return true
		}
	}
	return false
}

// checkACLs looks at the ACL of each existing node of paths not looked at
// yet and reports those that let strangers write (see ExposedNode). It
// does nothing when the registry's own ACL is open. A node that does not
// exist is looked at again next time (someone may create it); errors are
// ignored the same way: the check never fails an operation.
func (r *Registry) checkACLs(conn *zk.Conn, paths ...string) {
	if !r.closedACL {
		return
	}
	for _, p := range paths {
		r.mu.Lock()
		_, done := r.aclSeen[p]
		r.mu.Unlock()
		if done {
			continue
		}
		acl, _, err := conn.GetACL(p)
		if err != nil {
			if !errors.Is(err, zk.ErrNoNode) {
				r.log.Debug("zookeeper: read ACL", zap.String("node", p), zap.Error(err))
			}
			continue
		}
		r.markACL(p, acl)
	}
}

// markACL records that p was looked at with acl and reports it when open.
func (r *Registry) markACL(p string, acl []zk.ACL) {
	if !r.closedACL {
		return
	}
	r.mu.Lock()
	if _, done := r.aclSeen[p]; done || len(r.aclSeen) >= maxACLSeen {
		r.mu.Unlock()
		return
	}
	open := strangerMay(acl)
	r.aclSeen[p] = open
	if open {
		r.exposed = append(r.exposed, ExposedNode{Path: p, ACL: slices.Clone(acl)})
	}
	r.mu.Unlock()
	if open {
		r.exposedN.Add(1)
		r.log.Warn("zookeeper: an existing node lets anyone change it; strangers can add or remove what is registered under it. Set its ACL (setAcl) or use another root",
			zap.String("node", p), zap.String("acl", aclString(acl)))
	}
}

// maxACLSeen bounds the nodes whose ACL check is remembered.
const maxACLSeen = 1 << 16

// ancestors returns the nodes above p, from the top ("/a", "/a/b" for
// "/a/b/c").
func ancestors(p string) []string {
	var out []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}

// Exposed returns the existing nodes found so far whose ACL lets anyone
// change them (see ExposedNode): the root is looked at when the first
// session is up, the parents of a node before it is created, and a
// subscribed service's nodes when it is listed. Stats.Exposed counts them.
func (r *Registry) Exposed() []ExposedNode {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ExposedNode, len(r.exposed))
	for i, e := range r.exposed {
		out[i] = ExposedNode{Path: e.Path, ACL: slices.Clone(e.ACL)}
	}
	return out
}

func aclString(acl []zk.ACL) string {
	var b strings.Builder
	for i, a := range acl {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.Scheme + ":" + a.ID + ":" + permString(a.Perms))
	}
	return b.String()
}

// permString writes perms as ZooKeeper's CLI does (cdrwa).
func permString(p int32) string {
	var b strings.Builder
	for _, f := range []struct {
		bit int32
		c   byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if p&f.bit != 0 {
			b.WriteByte(f.c)
		}
	}
	return b.String()
}
