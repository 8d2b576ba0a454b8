package nametemplate

import (
	"errors"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		src, effective string
		unknown        []string
		bad            bool
	}{
		// Trident appends five hex digits of the claim's UID unless the
		// template uses the volume's name.
		{src: "{{.volume.Namespace}}_{{.volume.RequestName}}", effective: "{{.volume.Namespace}}_{{.volume.RequestName}}_{{slice .volume.Name 4 9}}"},
		{src: "{{.volume.Name}}", effective: "{{.volume.Name}}"},
		{src: "app_{{ slice .volume.Name 4 9 }}", effective: "app_{{ slice .volume.Name 4 9 }}"},
		// .volume.Namespace is not .volume.Name.
		{src: "x_{{.volume.Namespace}}", effective: "x_{{.volume.Namespace}}_{{slice .volume.Name 4 9}}"},
		{src: "{{.config.StoragePrefix}}{{.labels.cluster}}_{{.volume.Name}}", effective: "{{.config.StoragePrefix}}{{.labels.cluster}}_{{.volume.Name}}"},
		{src: "{{.volume.Nmae}}_{{.config.Password}}_{{.volume.Name}}", effective: "{{.volume.Nmae}}_{{.config.Password}}_{{.volume.Name}}",
			unknown: []string{".config.Password", ".volume.Nmae"}},
		{src: "{{.volume.Name", bad: true},
		{src: "{{nosuchfunc .volume.Name}}", bad: true},
		{src: "{{end}}", bad: true},
	} {
		tpl, err := Parse(tc.src)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed, want a syntax error", tc.src)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if tpl.Effective() != tc.effective || tpl.String() != tc.src {
			t.Errorf("%q: effective %q, want %q", tc.src, tpl.Effective(), tc.effective)
		}
		if !slices.Equal(tpl.Unknown(), tc.unknown) {
			t.Errorf("%q: unknown %v, want %v", tc.src, tpl.Unknown(), tc.unknown)
		}
	}
}

func TestRender(t *testing.T) {
	const pv = "pvc-5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
	full := Data{
		Volume: map[string]string{"Name": pv, "RequestName": "data-0", "Namespace": "apps", "StorageClass": "gold.fast",
			"Size": "1073741824", "Protocol": "file", "VolumeMode": "Filesystem"},
		Config: map[string]string{"StoragePrefix": "trident_", "BackendName": "nas-1", "StorageDriverName": "ontap-nas", "SVM": "svm0"},
		Labels: map[string]string{"cluster": "Cluster-A", "pvc": "{{.volume.Namespace}}/{{.volume.RequestName}}", "odd": "a&b+c"},
	}
	noClaim := Data{Volume: map[string]string{"Name": pv, "Size": "1", "Protocol": "file"}, Config: full.Config}
	for _, tc := range []struct {
		name, src string
		d         Data
		want      string
		missing   []string
		noName    bool
	}{
		{name: "trident's example", src: "{{.volume.Name}}_{{.labels.cluster}}_{{.volume.Namespace}}_{{.volume.RequestName}}", d: full,
			want: "pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f_Cluster_A_apps_data_0"},
		{name: "uniqueness suffix", src: "{{.volume.Namespace}}_{{.volume.RequestName}}", d: full, want: "apps_data_0_5e0c8"},
		{name: "prefix and config", src: "{{.config.StoragePrefix}}{{.config.BackendName}}_{{.volume.StorageClass}}_{{.volume.Name}}", d: full,
			want: "trident_nas_1_gold_fast_pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f"},
		// Label values are templates too.
		{name: "templated label", src: "{{.labels.pvc}}", d: full, want: "apps_data_0_5e0c8"},
		// html/template escapes first: & is &amp; and + is &#43;, whose
		// characters then become '_'.
		{name: "html escaping", src: "{{.labels.odd}}_{{.volume.Name}}", d: full, want: "a_amp_b_43_c_pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f"},
		{name: "runs and ends of _", src: "__--{{.volume.Namespace}}..--__{{.volume.Name}}--", d: full,
			want: "apps_pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f"},
		{name: "absent label is empty", src: "x_{{.labels.nolabel}}_{{.volume.Name}}", d: full, want: "x_pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f"},
		{name: "claim missing", src: "{{.volume.Namespace}}_{{.volume.RequestName}}_{{.volume.Name}}", d: noClaim,
			missing: []string{".volume.Namespace", ".volume.RequestName"}},
		{name: "storage class missing", src: "{{.volume.StorageClass}}", d: noClaim, missing: []string{".volume.StorageClass"}},
		{name: "claim not used", src: "{{.config.SVM}}_{{.volume.Name}}", d: noClaim, want: "svm0_pvc_5e0c8a43_1b2d_4c6e_9f70_8a9b0c1d2e3f"},
		// Trident falls back to the default name for these.
		{name: "starts with a digit", src: "{{.volume.Size}}_{{.volume.Name}}", d: full, noName: true},
		{name: "empty", src: "{{.labels.nolabel}}-{{slice .volume.Name 0 0}}", d: full, noName: true},
		{name: "unknown field", src: "{{.volume.Nmae}}_{{.volume.Name}}", d: full, noName: true},
		{name: "name too short to slice", src: "{{.volume.Namespace}}", d: Data{Volume: map[string]string{"Name": "vol1", "Namespace": "a"}}, noName: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(tc.d)
			var me *MissingError
			switch {
			case tc.missing != nil:
				if !errors.As(err, &me) || !slices.Equal(me.Fields, tc.missing) {
					t.Fatalf("got %q, %v; want missing %v", got, err, tc.missing)
				}
			case tc.noName:
				if !errors.Is(err, ErrNoName) {
					t.Fatalf("got %q, %v; want ErrNoName", got, err)
				}
			case err != nil || got != tc.want:
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"apps-data.0":     "apps_data_0",
		"__a__b__":        "a_b",
		"ÄÖ&x":            "x",
		"":                "",
		"UPPER_lower_123": "UPPER_lower_123",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}
