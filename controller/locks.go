package controller

// Keys of Service.locks, which serializes operations on one volume or name
// within this process. A call that finds its key busy is answered Aborted
// at once (TryLock) instead of queueing: the CO retries, and a queue of
// stale retries behind a slow ONTAP job would only grow. Across replicas
// the sidecars' leader election keeps one controller active.
//
// A volume's ID and a snapshot's name live in separate spaces.
func volumeKey(id string) string     { return "volume " + id }
func snapshotKey(name string) string { return "snapshot " + name }
