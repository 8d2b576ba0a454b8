package iscsi

// SetBeforeSideEffect installs the crash test's hook (see beforeSideEffect).
func SetBeforeSideEffect(f func(what string)) { beforeSideEffect = f }
