package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/sirupsen/logrus"
)

type requestIDKey struct{}

// WithRequestID returns ctx carrying id, for code that starts work outside a
// gRPC call (tests, background loops) but wants its logs correlated.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the id of the CSI call ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RequestIDHook adds the request id to every log entry made with
// logrus.WithContext(ctx), so packages below the server (node, controller,
// backends) get correlated logs without importing this package.
type RequestIDHook struct{}

func (RequestIDHook) Levels() []logrus.Level { return logrus.AllLevels }

func (RequestIDHook) Fire(e *logrus.Entry) error {
	if e.Context == nil {
		return nil
	}
	if id := RequestID(e.Context); id != "" {
		if _, set := e.Data["req_id"]; !set {
			e.Data["req_id"] = id
		}
	}
	return nil
}
