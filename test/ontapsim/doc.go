// Package ontapsim is an ONTAP REST API simulator: one cluster with one data SVM,
// serving the subset of /api that the ontap-nas and ontap-san drivers use
// (docs/design/ontap-rest.md), with ONTAP's semantics, plus a small
// test-only data plane under /sim.
//
// It is the other side of the wire from the client in backends/ontap and
// shares no code or types with it, so a bug on one side cannot hide one on
// the other. Run it in-process (New, Handler or Start) or as a server
// (`ontap-sim`, cmd/ontap-sim).
//
// It lives under test/ because it is a test double: the product binary
// (cmd/ontap-csi) and its image never contain it, which
// cmd/ontap-csi/deps_test.go checks.
//
// # API behaviour
//
// Endpoints: cluster (+ version), cluster nodes, jobs, SVMs, aggregates,
// network interfaces (data_nfs and data_iscsi LIFs), snapshot policies,
// volumes (create incl. FlexClone, modify, clone split, snapshot restore,
// delete with force), snapshots, NFS export policies and rules, LUNs and LUN
// attributes, igroups and initiators, LUN maps and reporting nodes, the iSCSI
// service, CHAP credentials, EMS (accepted), SnapMirror relationships
// (always empty), qtrees, tree quota rules and quota reports.
//
// Qtrees and quotas (qtrees.go, quotas.go; docs/design/economy.md §1, §2):
// a qtree is a directory at its volume's root with its own export policy
// (which the NFS data plane applies below it) and permissions; ids from 1,
// the default qtree "" listed as id 0, at most 4,995 per volume. Tree quota
// rules apply while the volume's quotas are on; turning them on leaves the
// state "initializing" for QuotaInitialize, then "on". With quotas on, a
// rule for a qtree with a derived quota (a default rule exists) or a limit
// change is in force at once; any other new rule is kept but fails its job
// with 5308571 until quotas are turned off and on. Deleting a qtree deletes
// its rules, renaming renames them. Config.QtreeQuotaMounts (root) makes
// each qtree a tmpfs of its hard limit, so writes past it fail and statfs
// shows it, as NFS clients of ONTAP see it. Config.MaxLUNsPerVolume (512)
// caps LUNs per volume (9158).
//
// Envelopes, query parameters (fields with *, **, !x and braces;
// ignore_unknown_fields; filters with *, |, !, <, >, <=, >=, a..b, null and
// quoting; return_records; return_timeout 0..120; max_records with
// _links.next and a Link header; order_by; offset), string error codes in
// {"error":{"message","code","target"}}, unknown arguments (262179) and
// malformed bodies (262199/262200) follow docs/design/ontap-rest.md §2. Expensive volume
// fields are only returned when named or with fields=**.
//
// Synchronous versus job: volume POST/PATCH/DELETE and snapshot
// POST/PATCH/DELETE always answer 202 with a job when return_timeout is 0;
// LUN POST/PATCH/DELETE do so only for ONTAP 9.16.1+ (Config.AsyncLUNCreate
// overrides). With return_timeout=N the request waits up to N seconds: a
// finished job turns the answer into 201 (POST) or 200 with the job link, a
// failed one into its error (HTTP status from the code's class). Jobs go
// queued → running → success/failure (integer code, message, error{}), and
// are forgotten 300 s after they end. The request itself checks syntax, the
// SVM and the object in the path; everything that depends on other objects
// (duplicates, aggregates, policies, space, junction conflicts, clones) is
// checked when the job runs, which is where ONTAP reports it. Volume names
// are reserved while their create job runs, so concurrent creates of one
// name have exactly one winner; the losers fail with 917526 (or 13107405
// while the winner is still running). Config.SyncDuplicateCheck reports
// that as a synchronous 409 instead (docs/design/ontap-rest.md §7 point 3).
//
// Rules modelled: volume names (917886/917887/917888), 20 MiB minimum and
// 100 TiB maximum (917534; 300 TiB with space.large_size_enabled, 9.12.1+),
// LUNs of 16 TiB at most in a volume without large size (5374125), sizes
// rounded up to 4 KiB (volumes and LUNs), junction paths
// (absolute, unique case-insensitively, parent mounted or a directory of a
// mounted volume; offline volumes lose theirs), LUN names and sizes, LUN
// cannot shrink (5374892) or be patched to its size (1254226), mapped LUN
// (1254197) and igroup (1254213) deletes, export policy in use (1703945) or
// default (1703947), FlexClone parents (524615) and busy snapshots (1638555),
// lowest free LUN ID per igroup and per initiator, duplicate maps (1254207),
// an initiator never seeing one LUN or one LUN ID twice (1254193, 1254324),
// thick versus thin space accounting against the aggregate (a thick create
// or grow that does not fit fails its job with 460770 and ONTAP's "not
// enough space in aggregate" text), space-reserved LUNs against the volume,
// and the per-SVM defaults: root volume "<svm>_root" at "/", export policy
// "default" (id (2<<32)+1, one rule allowing 0.0.0.0/0), iSCSI target IQN
// "iqn.1992-08.com.netapp:sn.<hex>:vs.2", CHAP credential "default" (none),
// one NFS and one iSCSI LIF per node, snapshot policies "default" and "none".
// Volume DELETE is lenient like real systems (implicit unmount, LUNs and
// maps go too); Config.StrictVolumeDelete refuses with 409 code 8. Without
// force a deleted volume goes to the recovery queue for 12 h (hidden,
// renamed "<name>_<n>", still using space). Undocumented codes chosen here:
// LUN ID in use 1254324; "temporarily locked" 503 code 8 (ONTAP's "in use",
// in its transient form); no space for a reserved LUN 460770.
//
// Authentication: HTTP basic (401 with WWW-Authenticate otherwise) or a TLS
// client certificate whose CN is the user name (IssueClientCertificate).
// HTTPS uses a certificate from a private ECDSA CA (CACertificatePEM, also
// <data-dir>/tls/ca.pem and GET /sim/tls/ca.pem), kept across restarts when
// a data dir is set. Idle keep-alive connections are closed after 5 s, as on
// ONTAP, which exercises a client's EOF retry.
//
// # Latency
//
// Off by default. RealisticLatency returns the figures of docs/design/ontap-rest.md
// §4.7; each request sleeps a draw from its class (Request, SyncMutation,
// LUNCreate) before it is handled, and each job lasts a draw from its kind
// (VolumeCreate, VolumePatch, VolumeDelete, SnapshotCreate, SnapshotDelete,
// CloneCreate, CloneSplit). Stats reports requests per "METHOD /api/template"
// and the latency injected (request delays plus job durations), so a
// benchmark can compute requests per operation and client wall time over
// injected latency. GET /sim/stats serves the same; POST /sim/stats/reset
// zeroes it.
//
// # Faults
//
// Config.Faults, SetFaults, PUT /sim/faults and `ontap-sim --faults`
// take rules in this syntax (see FaultSyntax):
//
//	[METHOD ]PATH=RATE:KIND[:ARG][@LIMIT], ...
//
// e.g. "POST /storage/volumes=0.2:503,*=0.1:eof,DELETE
// /storage/volumes/{uuid}=1:job:524486@1". Kinds: 429[:seconds] (code
// 262160, Retry-After), 503 (code 7), locked (409, code 8, "temporarily
// locked"), eof (connection closed) — all before any state change, so a
// retry is always safe — and eof-after (the request is fully processed,
// then the connection is closed instead of answering: the state changed but
// the client saw EOF) and job:CODE (the operation fails with CODE and
// changes nothing; async operations return their 202 and the job fails).
// Config.Seed makes the random draws reproducible.
//
// # Data plane (/sim, no authentication)
//
// Volumes are directories <data-dir>/volumes/<uuid>/ (mode and owner from
// nas.unix_permissions/uid/gid), LUNs are sparse files
// <data-dir>/luns/<uuid>.img of the LUN's size (grown in place on resize),
// snapshots and FlexClones are sparse copies (reflink when possible), and
// deleting frees them. Without a data dir a temporary one is removed by
// Close.
//
//	GET /sim/nfs/export?server=<LIF ip>&client=<ip>&path=<junction path>
//	  200 {"volume":"<name>","directory":"<abs dir>","access":"rw"|"ro"}
//	  403 {"error":"..."}  an export policy on the way denies the client
//	                       (every volume crossed from "/" needs read access)
//	  404 {"error":"..."}  server is not an up NFS LIF of the SVM, or no
//	                       online volume or directory at path
//	  Rules: first rule by index whose clientmatch (IP, CIDR, ip/netmask,
//	  comma list; names never match) and protocol (any, nfs*) fit decides;
//	  ro_rule/rw_rule any, sys and none allow, never denies; rw needs ro.
//
//	POST /sim/iscsi/login {"initiator","portal":"ip[:3260]","target",
//	                       "chap":{"username","secret","targetUsername","targetSecret"}}
//	GET  /sim/iscsi/luns?initiator=&portal=&target=   (rescan, no CHAP check)
//	  200 {"target":"<iqn>","luns":[{"lun":<id>,"serial":"<12 chars>",
//	       "serialHex":"<hex>","wwid":"3600a0980<hex>","file":"<abs path>",
//	       "sizeBytes":N,"volume":"<name>","path":"/vol/v/lun0"}]}
//	  The LUNs mapped to any iSCSI/mixed igroup holding the initiator, whose
//	  map's reporting nodes (by default the LUN's node and its HA partner)
//	  include the portal's node, in online volumes. 404 unknown target or
//	  portal not an up iSCSI LIF; 401 CHAP mismatch, CHAP required but
//	  missing, mutual CHAP not matching, or authentication_type deny (the
//	  initiator's own credential, else "default").
//
//	GET /sim/info, GET /sim/stats, POST /sim/stats/reset,
//	GET|PUT /sim/faults (body: the fault spec), GET /sim/tls/ca.pem
//
//	GET|PUT /sim/dataplane {"cutOnUnmap":bool}
//	  200 {"cutOnUnmap":bool,"cuts":[{"at","lun","igroup","initiators","file"}]}
//	  The file data plane's stand-in for a fence (cut.go): with cutOnUnmap,
//	  deleting a LUN map gives the LUN a new file, so a host still bound to
//	  the old one writes only to "file". 409 with the kernel data plane.
//
// # State
//
// With a data dir the model is written to <data-dir>/state.json atomically
// (temp file, fsync, rename) after every change and on Close, and loaded by
// New: a restarted simulator has the same SVM, objects, serials and CA.
// Tests can read the state with Volumes, LUNs, IGroups, LUNMaps,
// ExportPolicies, Snapshots, Jobs and RecoveryQueue, and build fixtures
// (e.g. Trident-made volumes) with CreateVolume, CreateLUN, CreateIGroup,
// MapLUN, CreateExportPolicy, CreateSnapshot or Do — in-process REST calls
// with the same validation, not counted in Stats and free of faults.
package ontapsim
