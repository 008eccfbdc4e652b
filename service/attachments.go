package service

import "context"

type (
	outgoingKey struct{}
	incomingKey struct{}
)

// Attachments are string key-value pairs carried with a call, like HTTP
// headers: consumer to provider in the request, provider to consumer in the
// response.
//
// A context holds two sets, kept apart as grpc-go's metadata does: the
// outgoing attachments a consumer sends with its calls (WithAttachment),
// and the incoming ones a provider method received (Attachment,
// Incoming). A provider's incoming attachments are never sent on by its
// own calls unless it says so with Propagate.
type Attachments map[string]string

// WithAttachment returns a copy of ctx whose outgoing attachments include
// key=value. The attachments of ctx are not modified.
func WithAttachment(ctx context.Context, key, value string) context.Context {
	old := AttachmentsFrom(ctx)
	m := make(Attachments, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[key] = value
	return context.WithValue(ctx, outgoingKey{}, m)
}

// WithAttachments returns a copy of ctx whose outgoing attachments are a.
// The map must not be modified afterwards.
func WithAttachments(ctx context.Context, a Attachments) context.Context {
	return context.WithValue(ctx, outgoingKey{}, a)
}

// AttachmentsFrom returns the outgoing attachments of ctx, or nil: what a
// call made with ctx sends. The map must not be modified.
func AttachmentsFrom(ctx context.Context) Attachments {
	a, _ := ctx.Value(outgoingKey{}).(Attachments)
	return a
}

// NewIncomingContext returns a copy of ctx carrying a as the attachments
// of the call being served. The framework calls it once per call, with
// its own keys (token and the like) already removed; a must not be
// modified afterwards.
func NewIncomingContext(ctx context.Context, a Attachments) context.Context {
	return context.WithValue(ctx, incomingKey{}, a)
}

// Incoming returns the attachments of the call being served, or nil. The
// map must not be modified.
func Incoming(ctx context.Context) Attachments {
	a, _ := ctx.Value(incomingKey{}).(Attachments)
	return a
}

// Attachment returns the value of one attachment of the call being served.
func Attachment(ctx context.Context, key string) (string, bool) {
	v, ok := Incoming(ctx)[key]
	return v, ok
}

// Propagate returns a copy of ctx whose outgoing attachments also carry
// the incoming attachments named by keys (every incoming one when keys is
// empty), so that the provider's own calls pass them on. It is the one way
// incoming attachments travel further.
func Propagate(ctx context.Context, keys ...string) context.Context {
	in := Incoming(ctx)
	if len(in) == 0 {
		return ctx
	}
	old := AttachmentsFrom(ctx)
	m := make(Attachments, len(old)+len(in))
	for k, v := range old {
		m[k] = v
	}
	if len(keys) == 0 {
		for k, v := range in {
			m[k] = v
		}
	} else {
		for _, k := range keys {
			if v, ok := in[k]; ok {
				m[k] = v
			}
		}
	}
	return context.WithValue(ctx, outgoingKey{}, m)
}
