package iscsi

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	loginsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ontap_csi",
		Subsystem: "iscsi",
		Name:      "logins_total",
		Help:      "iSCSI portal logins attempted, by result (success, auth_failed, error).",
	}, []string{"result"})
	logoutsTotal = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: "ontap_csi",
		Subsystem: "iscsi",
		Name:      "logouts_total",
		Help:      "iSCSI portal logouts after the last LUN of a target was detached.",
	})
	serialMismatchesTotal = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: "ontap_csi",
		Subsystem: "iscsi",
		Name:      "serial_mismatches_total",
		Help:      "SCSI devices or multipath maps found at a LUN's address with another LUN's serial (stale kernel state or a mapping change on the array).",
	})
)
