package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fakeAPI is a small Kubernetes API server for running the binary as it
// runs in a cluster: in-cluster config (service account token and CA),
// JSON, get/list/watch/create/update/delete, the status subresource,
// resource versions, conflicts and finalizers, for the few collections the
// controller uses. It records every request as "verb resource" so a test can
// hold the binary to the RBAC it is granted.
type fakeAPI struct {
	tokens map[string]string // service account token → who

	mu      sync.Mutex
	rv      int
	objects map[string]map[string]map[string]any // collection → name → object
	events  []apiEvent
	changed *sync.Cond
	calls   map[string]map[string]int // who → "verb resource" → count
	closed  bool
}

type apiEvent struct {
	collection string
	rv         int
	typ        string
	object     map[string]any
}

// collection describes one resource the fake serves.
type collection struct {
	path, apiVersion, kind, resource string
}

const fakeNamespace = "trident"

var fakeCollections = []collection{
	{"/api/v1/nodes", "v1", "Node", "nodes"},
	{"/api/v1/namespaces/" + fakeNamespace + "/secrets", "v1", "Secret", "secrets"},
	{"/apis/trident.netapp.io/v1/namespaces/" + fakeNamespace + "/tridentnodes", "trident.netapp.io/v1", "TridentNode", "tridentnodes"},
	{"/apis/trident.netapp.io/v1/namespaces/" + fakeNamespace + "/tridentbackendconfigs", "trident.netapp.io/v1", "TridentBackendConfig", "tridentbackendconfigs"},
	{"/api/v1/persistentvolumes", "v1", "PersistentVolume", "persistentvolumes"},
	{"/apis/storage.k8s.io/v1/storageclasses", "storage.k8s.io/v1", "StorageClass", "storageclasses"},
}

// newFakeAPI serves clients presenting one of tokens (token → who).
func newFakeAPI(tokens map[string]string) *fakeAPI {
	a := &fakeAPI{tokens: tokens, objects: map[string]map[string]map[string]any{}, calls: map[string]map[string]int{}}
	a.changed = sync.NewCond(&a.mu)
	for _, c := range fakeCollections {
		a.objects[c.path] = map[string]map[string]any{}
	}
	return a
}

// serve serves the API over TLS on l until close.
func (a *fakeAPI) serve(l net.Listener, cert tls.Certificate) *http.Server {
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})) }()
	return srv
}

func (a *fakeAPI) close() {
	a.mu.Lock()
	a.closed = true
	a.changed.Broadcast()
	a.mu.Unlock()
}

// put stores an object as a client would create it (tests' fixtures).
func (a *fakeAPI) put(c collection, obj map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.store(c, obj, "ADDED")
}

// get returns a copy of an object, or nil.
func (a *fakeAPI) get(resource, name string) map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := collectionOf(resource)
	if o := a.objects[c.path][name]; o != nil {
		return deepCopy(o)
	}
	return nil
}

// used returns the "verb resource" pairs who requested so far.
func (a *fakeAPI) used(who string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for k := range a.calls[who] {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func collectionOf(resource string) collection {
	for _, c := range fakeCollections {
		if c.resource == resource {
			return c
		}
	}
	panic("no collection " + resource)
}

func (a *fakeAPI) store(c collection, obj map[string]any, typ string) {
	a.rv++
	meta := obj["metadata"].(map[string]any)
	meta["resourceVersion"] = strconv.Itoa(a.rv)
	obj["apiVersion"], obj["kind"] = c.apiVersion, c.kind
	name := meta["name"].(string)
	if typ == "DELETED" {
		delete(a.objects[c.path], name)
	} else {
		a.objects[c.path][name] = obj
	}
	a.events = append(a.events, apiEvent{collection: c.path, rv: a.rv, typ: typ, object: deepCopy(obj)})
	a.changed.Broadcast()
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	who, ok := a.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		apiError(w, http.StatusUnauthorized, "Unauthorized", "no valid service account token")
		return
	}
	if r.URL.Path == "/version" { // discovery: any authenticated client
		writeJSON(w, http.StatusOK, map[string]any{"major": "1", "minor": "34", "gitVersion": "v1.34.0"})
		return
	}
	var c collection
	var rest string
	for _, cc := range fakeCollections {
		if r.URL.Path == cc.path || strings.HasPrefix(r.URL.Path, cc.path+"/") {
			c, rest = cc, strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, cc.path), "/")
		}
	}
	if c.path == "" {
		apiError(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	}
	name, sub, _ := strings.Cut(rest, "/")
	verb := map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update", http.MethodDelete: "delete", http.MethodPatch: "patch"}[r.Method]
	if name == "" && r.Method == http.MethodGet {
		verb = "list"
		if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
			verb = "watch"
		}
	}
	resource := c.resource
	if sub != "" {
		resource += "/" + sub
	}
	a.mu.Lock()
	if a.calls[who] == nil {
		a.calls[who] = map[string]int{}
	}
	a.calls[who][verb+" "+resource]++
	a.mu.Unlock()

	switch {
	case verb == "watch":
		a.watch(w, r, c)
	case verb == "list":
		a.list(w, c)
	case verb == "get":
		a.mu.Lock()
		o := a.objects[c.path][name]
		a.mu.Unlock()
		if o == nil {
			apiError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", c.resource, name))
			return
		}
		writeJSON(w, http.StatusOK, o)
	case verb == "create" && name == "":
		a.create(w, r, c)
	case verb == "update" && name != "":
		a.update(w, r, c, name, sub == "status")
	case verb == "delete" && name != "":
		a.delete(w, c, name)
	default:
		apiError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "not supported by the fake")
	}
}

func (a *fakeAPI) list(w http.ResponseWriter, c collection) {
	a.mu.Lock()
	items := []any{}
	for _, o := range a.objects[c.path] {
		items = append(items, deepCopy(o))
	}
	rv := a.rv
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": c.apiVersion, "kind": c.kind + "List",
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(rv)}, "items": items,
	})
}

// watch streams the collection's events after the given resource version
// until the client goes away.
func (a *fakeAPI) watch(w http.ResponseWriter, r *http.Request, c collection) {
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		apiError(w, http.StatusBadRequest, "BadRequest", "sendInitialEvents is not supported")
		return
	}
	from, _ := strconv.Atoi(r.URL.Query().Get("resourceVersion"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	flusher.Flush()
	done := r.Context().Done()
	go func() { // wake the loop below when the client goes away
		<-done
		a.mu.Lock()
		a.changed.Broadcast()
		a.mu.Unlock()
	}()
	enc := json.NewEncoder(w)
	next := 0
	for {
		a.mu.Lock()
		for next >= len(a.events) && !a.closed && r.Context().Err() == nil {
			a.changed.Wait()
		}
		if a.closed || r.Context().Err() != nil {
			a.mu.Unlock()
			return
		}
		batch := a.events[next:]
		next = len(a.events)
		a.mu.Unlock()
		for _, ev := range batch {
			if ev.collection != c.path || ev.rv <= from {
				continue
			}
			if err := enc.Encode(map[string]any{"type": ev.typ, "object": ev.object}); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

func (a *fakeAPI) create(w http.ResponseWriter, r *http.Request, c collection) {
	obj, ok := readObject(w, r)
	if !ok {
		return
	}
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	if name == "" {
		apiError(w, http.StatusUnprocessableEntity, "Invalid", "metadata.name is required")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.objects[c.path][name] != nil {
		apiError(w, http.StatusConflict, "AlreadyExists", fmt.Sprintf("%s %q already exists", c.resource, name))
		return
	}
	meta["uid"] = fmt.Sprintf("uid-%s-%d", name, a.rv+1)
	meta["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	if strings.Contains(c.path, "/namespaces/") {
		meta["namespace"] = fakeNamespace
	}
	a.store(c, obj, "ADDED")
	writeJSON(w, http.StatusCreated, obj)
}

func (a *fakeAPI) update(w http.ResponseWriter, r *http.Request, c collection, name string, status bool) {
	obj, ok := readObject(w, r)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.objects[c.path][name]
	if cur == nil {
		apiError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", c.resource, name))
		return
	}
	curMeta := cur["metadata"].(map[string]any)
	meta, _ := obj["metadata"].(map[string]any)
	if rv, _ := meta["resourceVersion"].(string); rv != "" && rv != curMeta["resourceVersion"] {
		apiError(w, http.StatusConflict, "Conflict", "the object has been modified; please apply your changes to the latest version and try again")
		return
	}
	next := deepCopy(cur)
	if status {
		next["status"] = obj["status"]
	} else {
		for k, v := range obj {
			if k != "status" && k != "metadata" {
				next[k] = v
			}
		}
		for k := range next {
			if _, ok := obj[k]; !ok && k != "status" && k != "metadata" && k != "apiVersion" && k != "kind" {
				delete(next, k)
			}
		}
		nm := next["metadata"].(map[string]any)
		for _, k := range []string{"finalizers", "labels", "annotations"} {
			if v, ok := meta[k]; ok {
				nm[k] = v
			} else {
				delete(nm, k)
			}
		}
	}
	nm := next["metadata"].(map[string]any)
	if fins, _ := nm["finalizers"].([]any); len(fins) == 0 && nm["deletionTimestamp"] != nil {
		a.store(c, next, "DELETED")
	} else {
		a.store(c, next, "MODIFIED")
	}
	writeJSON(w, http.StatusOK, next)
}

// delete honours finalizers as the API server does: with any left, the
// object only gets its deletion timestamp.
func (a *fakeAPI) delete(w http.ResponseWriter, c collection, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.objects[c.path][name]
	if cur == nil {
		apiError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("%s %q not found", c.resource, name))
		return
	}
	next := deepCopy(cur)
	meta := next["metadata"].(map[string]any)
	if fins, _ := meta["finalizers"].([]any); len(fins) > 0 {
		if meta["deletionTimestamp"] == nil {
			meta["deletionTimestamp"] = time.Now().UTC().Format(time.RFC3339)
			a.store(c, next, "MODIFIED")
		}
		writeJSON(w, http.StatusOK, next)
		return
	}
	a.store(c, next, "DELETED")
	writeJSON(w, http.StatusOK, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"})
}

func readObject(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	data, err := io.ReadAll(r.Body)
	var obj map[string]any
	if err == nil {
		err = json.Unmarshal(data, &obj)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "BadRequest", err.Error())
		return nil, false
	}
	if _, ok := obj["metadata"].(map[string]any); !ok {
		obj["metadata"] = map[string]any{}
	}
	return obj, true
}

func apiError(w http.ResponseWriter, code int, reason, msg string) {
	writeJSON(w, code, map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": msg, "reason": reason, "code": code,
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func deepCopy(o map[string]any) map[string]any {
	data, _ := json.Marshal(o)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}
