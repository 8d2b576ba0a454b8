package tracking

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// below is a confine function that admits paths below base.
func below(base string) func(string) (string, error) {
	return func(p string) (string, error) {
		if !strings.HasPrefix(filepath.Clean(p), base+"/") {
			return "", fmt.Errorf("%s is not below %s", p, base)
		}
		return filepath.Clean(p), nil
	}
}

func TestDecodeTrident2301(t *testing.T) {
	info, err := Decode(fixture(t, "trident-23.01/pvc-san.json"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Legacy || info.Protocol() != ProtocolBlock || info.FilesystemType != "xfs" || info.IscsiLunSerial != "80D4s+H0Ma0F" ||
		info.IscsiLunNumber != 0 || info.Device() != "/dev/dm-0" || len(info.PublishedPaths) != 1 {
		t.Fatalf("decoded %+v", info)
	}
	if got := info.Portals(); len(got) != 2 || got[0] != "10.193.108.21:3260" || got[1] != "10.193.108.22:3260" {
		t.Fatalf("portals %v", got)
	}
	nas, err := Decode(fixture(t, "trident-23.01/pvc-nas.json"))
	if err != nil {
		t.Fatal(err)
	}
	if nas.Legacy || nas.Protocol() != ProtocolFile || nas.NfsPath != "/trident_pvc_9f8e7d6c_5b4a_4392_8170_6f5e4d3c2b1a" || nas.PublishedPaths == nil {
		t.Fatalf("decoded %+v", nas)
	}
}

func TestReadTrident2010(t *testing.T) {
	for _, kind := range []string{"san", "nas"} {
		t.Run(kind, func(t *testing.T) {
			root := t.TempDir()
			kubelet := filepath.Join(root, "kubelet")
			staging := filepath.Join(kubelet, "plugins/kubernetes.io/csi/pv/pvc-1/globalmount")
			if err := os.MkdirAll(staging, 0o750); err != nil {
				t.Fatal(err)
			}
			store, err := existingStore(t, filepath.Join(root, "tracking"), below(kubelet))
			if err != nil {
				t.Fatal(err)
			}
			legacy, _ := json.Marshal(map[string]string{"stagingTargetPath": staging})
			if err := os.WriteFile(filepath.Join(store.Dir(), "pvc-1.json"), legacy, 0o600); err != nil {
				t.Fatal(err)
			}
			pi := fixture(t, "trident-20.10/volumePublishInfo-"+kind+".json")
			if err := os.WriteFile(filepath.Join(staging, LegacyPublishInfoFile), pi, 0o600); err != nil {
				t.Fatal(err)
			}

			info, err := store.Read("pvc-1")
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"san": ProtocolBlock, "nas": ProtocolFile}[kind]
			if !info.Legacy || info.StagingTargetPath != staging || info.Protocol() != want {
				t.Fatalf("read %+v", info)
			}
			if kind == "san" && (info.IscsiInitiatorSecret != "Xk3o9WfPq2LmZ8aB" || info.IscsiLunNumber != 3 || len(info.Portals()) != 2) {
				t.Fatalf("iSCSI fields %+v", info.PublishInfo)
			}

			// Writing upgrades to the 23.01 layout, which stands alone.
			if err := store.Write("pvc-1", info); err != nil {
				t.Fatal(err)
			}
			if err := RemoveLegacy(staging); err != nil {
				t.Fatal(err)
			}
			again, err := store.Read("pvc-1")
			if err != nil {
				t.Fatal(err)
			}
			if again.Legacy || again.Protocol() != want || again.IscsiInitiatorSecret != info.IscsiInitiatorSecret || again.MountOptions != info.MountOptions {
				t.Fatalf("after upgrade %+v", again)
			}
		})
	}
}

// A legacy tracking file whose volumePublishInfo.json is gone still reads,
// so unstage can clean up (Trident #706).
func TestReadLegacyWithoutPublishInfo(t *testing.T) {
	root := t.TempDir()
	staging := filepath.Join(root, "kubelet/pv/globalmount")
	store, _ := existingStore(t, filepath.Join(root, "tracking"), below(filepath.Join(root, "kubelet")))
	legacy, _ := json.Marshal(map[string]string{"stagingTargetPath": staging})
	os.WriteFile(filepath.Join(store.Dir(), "pvc-1.json"), legacy, 0o600)
	info, err := store.Read("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Legacy || info.Protocol() != "" || info.StagingTargetPath != staging {
		t.Fatalf("read %+v", info)
	}
}

func TestReadRefuses(t *testing.T) {
	root := t.TempDir()
	kubelet := filepath.Join(root, "kubelet")
	store, err := existingStore(t, filepath.Join(root, "tracking"), below(kubelet))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(store.Dir(), name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside, _ := json.Marshal(map[string]string{"stagingTargetPath": "/etc"})
	write("outside.json", outside)
	write("garbage.json", []byte("{not json"))
	write("null.json", []byte("null"))
	write("nostaging.json", []byte(`{"fstype":"ext4"}`))
	write("huge.json", bytes.Repeat([]byte(" "), maxFileSize+1))
	os.WriteFile(filepath.Join(root, "elsewhere.json"), fixture(t, "trident-23.01/pvc-nas.json"), 0o600)
	if err := os.Symlink(filepath.Join(root, "elsewhere.json"), filepath.Join(store.Dir(), "link.json")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"outside", "garbage", "null", "nostaging", "huge", "link"} {
		if info, err := store.Read(id); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Read(%s) = %+v, %v; want an error", id, info, err)
		}
	}
	if _, err := store.Read("absent"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read(absent) = %v, want ErrNotFound", err)
	}
}

// TestWriteIsTridentFormatAndAtomic: Write (no fsync) and WriteDurable
// leave the same file.
func TestWriteIsTridentFormatAndAtomic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		durable bool
	}{{"write", false}, {"durable write", true}} {
		t.Run(tc.name, func(t *testing.T) { testWriteFormat(t, tc.durable) })
	}
}

func testWriteFormat(t *testing.T, durable bool) {
	dir := filepath.Join(t.TempDir(), "tracking")
	store, err := NewStore(dir, below("/kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	write := store.Write
	if durable {
		write = store.WriteDurable
	}
	// Opening the store leaves the host alone; the first write creates
	// the directory.
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("NewStore created %s: %v", dir, err)
	}
	if _, err := store.Read("pvc-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read from a missing directory: %v, want ErrNotFound", err)
	}
	info := &Info{
		PublishInfo:       PublishInfo{Localhost: true, FilesystemType: "nfs", NfsServerIP: "10.0.0.1", NfsPath: "/v"},
		StagingTargetPath: "/kubelet/plugins/x/globalmount",
	}
	if err := write("pvc-1", info); err != nil {
		t.Fatal(err)
	}
	info.AddPublished("/kubelet/pods/a/mount")
	if err := write("pvc-1", info); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "pvc-1.json" {
		t.Fatalf("directory holds %v; temporary files left?", entries)
	}
	st, _ := os.Stat(filepath.Join(dir, "pvc-1.json"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	data, _ := os.ReadFile(filepath.Join(dir, "pvc-1.json"))
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	// Keys Trident 23.01+ reads, with Trident's spelling.
	for _, k := range []string{"localhost", "fstype", "nfsServerIp", "nfsPath", "useCHAP", "stagingTargetPath", "publishedTargetPaths", "VolumeTrackingInfoPath"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("key %q missing from %s", k, data)
		}
	}
	got, err := store.Read("pvc-1")
	if err != nil || !got.IsPublishedAt("/kubelet/pods/a/mount") || got.NfsServerIP != "10.0.0.1" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if err := store.Delete("pvc-1"); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete("pvc-1"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

// A reader never sees a half-written file: while one goroutine rewrites
// the state with records of very different sizes, every read of it parses
// and is one of them (Trident reading the file, or a process after a crash
// in the middle of a write, relies on the rename).
func TestWriteNeverExposesAPartialFile(t *testing.T) {
	store, err := NewStore(filepath.Join(t.TempDir(), "tracking"), below("/kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	small := &Info{PublishInfo: PublishInfo{FilesystemType: "nfs", NfsServerIP: "10.0.0.1", NfsPath: "/v"}, StagingTargetPath: "/kubelet/s"}
	big := &Info{PublishInfo: small.PublishInfo, StagingTargetPath: "/kubelet/s"}
	for i := 0; i < 200; i++ {
		big.AddPublished(fmt.Sprintf("/kubelet/pods/pod-%03d/volumes/kubernetes.io~csi/pvc-1/mount", i))
	}
	if err := store.Write("pvc-1", small); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 300; i++ {
			rec := small
			if i%2 == 0 {
				rec = big
			}
			if err := store.Write("pvc-1", rec); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			if reads == 0 {
				t.Fatal("no read overlapped the writes")
			}
			return
		default:
		}
		got, err := store.Read("pvc-1")
		if err != nil {
			t.Fatalf("read %d during writes: %v", reads, err)
		}
		if n := len(got.PublishedPaths); n != 0 && n != 200 {
			t.Fatalf("read %d: %d published paths, a record that was never written", reads, n)
		}
		reads++
	}
}

func TestVolumeIDsAreConfined(t *testing.T) {
	store, err := NewStore(t.TempDir(), below("/kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	info := &Info{StagingTargetPath: "/kubelet/x"}
	for _, id := range []string{"", ".", "..", "../escape", "a/b", ".hidden", "-flag", "a\x00b", "a b", strings.Repeat("a", 129)} {
		if ValidVolumeID(id) {
			t.Errorf("ValidVolumeID(%q) = true", id)
		}
		if err := store.Write(id, info); err == nil {
			t.Errorf("Write(%q) succeeded", id)
		}
		if _, err := store.Read(id); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Read(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"pvc-8d7c5f2e-1b3a-4c6d-9e8f-0a1b2c3d4e5f", "vol_1", "a", "A.b-c", strings.Repeat("a", 128)} {
		if !ValidVolumeID(id) {
			t.Errorf("ValidVolumeID(%q) = false", id)
		}
	}
}

// FuzzDecode: tracking files are read from the host; whatever they hold,
// decoding must not panic, and what decodes must encode to a file that
// decodes to the same encoding.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"stagingTargetPath":"/k/p"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := Decode(data)
		if err != nil {
			return
		}
		if info.StagingTargetPath == "" {
			t.Fatal("decoded without a staging path")
		}
		once, err := json.Marshal(info)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		back, err := Decode(once)
		if err != nil {
			t.Fatalf("re-decode %s: %v", once, err)
		}
		if back.Legacy && !info.Legacy {
			t.Fatal("a full tracking file re-decoded as legacy")
		}
		twice, _ := json.Marshal(back)
		if !bytes.Equal(once, twice) {
			t.Fatalf("encoding not stable:\n%s\n%s", once, twice)
		}
	})
}

func FuzzDecodePublishInfo(f *testing.F) {
	f.Add([]byte(`{"fstype":"ext4","iscsiTargetIqn":"iqn.1992-08.com.netapp:sn.1:vs.2","iscsiLunNumber":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pi, err := DecodePublishInfo(data)
		if err != nil {
			return
		}
		once, err := json.Marshal(pi)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		back, err := DecodePublishInfo(once)
		if err != nil {
			t.Fatalf("re-decode %s: %v", once, err)
		}
		if back.Protocol() != pi.Protocol() {
			t.Fatalf("protocol changed in a round trip: %q -> %q", pi.Protocol(), back.Protocol())
		}
	})
}

// existingStore opens a store on a tracking directory that already exists,
// as on a node where Trident has run.
func existingStore(t *testing.T, dir string, confine func(string) (string, error)) (*Store, error) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return NewStore(dir, confine)
}
