package main

import (
	"os"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/server"
)

// setupLogging configures the process-wide logrus logger from validated options.
func setupLogging(format, level string, debug bool) {
	logrus.SetOutput(os.Stderr)
	if format == "json" {
		logrus.SetFormatter(&logrus.JSONFormatter{TimestampFormat: "2006-01-02T15:04:05.000Z07:00"})
	} else {
		logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000Z07:00"})
	}
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		lvl = logrus.InfoLevel
	}
	if debug && lvl < logrus.DebugLevel {
		lvl = logrus.DebugLevel
	}
	logrus.SetLevel(lvl)
	logrus.AddHook(server.RequestIDHook{})
}
