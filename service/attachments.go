package service

import "context"

type attachmentsKey struct{}

// Attachments are string key-value pairs carried with a call, like HTTP
// headers: consumer to provider in the request, provider to consumer in the
// response.
type Attachments map[string]string

// WithAttachment returns a copy of ctx whose attachments include key=value.
// The attachments of ctx are not modified.
func WithAttachment(ctx context.Context, key, value string) context.Context {
	old := AttachmentsFrom(ctx)
	m := make(Attachments, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[key] = value
	return context.WithValue(ctx, attachmentsKey{}, m)
}

// WithAttachments returns a copy of ctx carrying a. The map must not be
// modified afterwards.
func WithAttachments(ctx context.Context, a Attachments) context.Context {
	return context.WithValue(ctx, attachmentsKey{}, a)
}

// AttachmentsFrom returns the attachments carried by ctx, or nil. The map
// must not be modified.
func AttachmentsFrom(ctx context.Context) Attachments {
	a, _ := ctx.Value(attachmentsKey{}).(Attachments)
	return a
}

// Attachment returns the value of one attachment carried by ctx.
func Attachment(ctx context.Context, key string) (string, bool) {
	v, ok := AttachmentsFrom(ctx)[key]
	return v, ok
}
