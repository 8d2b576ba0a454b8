package server

import (
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

const stripped = "***stripped***"

// Sanitize returns a copy of m that is safe to log: fields the CSI spec marks
// csi_secret are blanked, and so are map entries whose key names a secret.
// The second rule matters because Trident's publish_context carries CHAP
// secrets (iscsiInitiatorSecret, ...) in a field the spec does not mark.
func Sanitize(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	c := proto.Clone(m)
	sanitize(c.ProtoReflect())
	return c
}

func sanitize(m protoreflect.Message) {
	var secret []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if isSecretField(fd) {
			secret = append(secret, fd)
			return true
		}
		switch {
		case fd.IsMap():
			mp := v.Map()
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				mp.Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					sanitize(mv.Message())
					return true
				})
			} else if fd.MapValue().Kind() == protoreflect.StringKind {
				mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
					if IsSecretKey(k.String()) {
						mp.Set(k, protoreflect.ValueOfString(stripped))
					}
					return true
				})
			}
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				sanitize(l.Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind:
			sanitize(v.Message())
		}
		return true
	})
	for _, fd := range secret {
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.StringKind {
					mp.Set(k, protoreflect.ValueOfString(stripped))
				} else {
					mp.Clear(k)
				}
				return true
			})
		case fd.Kind() == protoreflect.StringKind && !fd.IsList():
			m.Set(fd, protoreflect.ValueOfString(stripped))
		default:
			m.Clear(fd)
		}
	}
}

func isSecretField(fd protoreflect.FieldDescriptor) bool {
	opts := fd.Options()
	if opts == nil {
		return false
	}
	v, ok := proto.GetExtension(opts, csi.E_CsiSecret).(bool)
	return ok && v
}

// IsSecretKey reports whether a map key (publish context, volume context,
// parameters) names a value that must never be logged.
func IsSecretKey(key string) bool {
	k := strings.ToLower(key)
	for _, word := range []string{"secret", "password", "passphrase", "privatekey", "private_key"} {
		if strings.Contains(k, word) {
			return true
		}
	}
	return false
}

// sanitizedText renders m for a log line after Sanitize.
func sanitizedText(m proto.Message) string {
	return prototext.MarshalOptions{}.Format(Sanitize(m))
}
