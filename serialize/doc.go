// Package serialize encodes and decodes call bodies. Serializers are looked
// up by name and by the id carried in the frame header: msgpack (the
// default, id 27, as in Dubbo) and json; Stream makes a Serializer of any
// format with stream encoders and decoders (encoding/gob, for one), to
// register in a Table. Decoding untrusted bytes is bounded in memory and
// nesting depth.
package serialize
