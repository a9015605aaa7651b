package deploy_test

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/skillreg/skillreg/access"
	"github.com/skillreg/skillreg/config"
)

// maxMultiReplicaPoll is the longest poll we accept for git sources when
// several replicas run without peers: the poll is then their consistency
// window.
const maxMultiReplicaPoll = time.Minute

// maxRelayedPoll is the longest poll we accept when the replicas relay
// webhooks to each other (peers): the poll is then the fallback for a
// replica a relay missed.
const maxRelayedPoll = 10 * time.Minute

type manifests struct {
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]*corev1.Secret
	pdbs         []*policyv1.PodDisruptionBudget
	files        []string // base names of the manifest files
}

const kubeDir = "kubernetes"

// loadManifests decodes every document of every manifest with the API
// types, strictly: an unknown or misspelt field is an error.
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s: %v", kubeDir, err)
	}
	ms := &manifests{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		ms.files = append(ms.files, filepath.Base(p))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitYAML(data) {
			where := fmt.Sprintf("%s document %d", p, i+1)
			var tm struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := sigsyaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 StatefulSet":
				obj = &appsv1.StatefulSet{}
			case "v1 Service":
				obj = &corev1.Service{}
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			case "v1 Secret":
				obj = &corev1.Secret{}
			case "policy/v1 PodDisruptionBudget":
				obj = &policyv1.PodDisruptionBudget{}
			default:
				t.Fatalf("%s: kind %q of %q is not one this test knows; teach it", where, tm.Kind, tm.APIVersion)
			}
			if err := decodeStrict(doc, obj); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			switch o := obj.(type) {
			case *appsv1.StatefulSet:
				ms.statefulSets = append(ms.statefulSets, o)
			case *corev1.Service:
				ms.services = append(ms.services, o)
			case *corev1.ConfigMap:
				ms.configMaps[o.Name] = o
			case *corev1.Secret:
				ms.secrets[o.Name] = o
			case *policyv1.PodDisruptionBudget:
				ms.pdbs = append(ms.pdbs, o)
			}
		}
	}
	return ms
}

// decodeStrict decodes YAML as the API server decodes JSON: field names
// match case-sensitively, and unknown or duplicate fields are errors.
// (sigs.k8s.io/yaml's UnmarshalStrict goes through encoding/json, which
// accepts readOnlyRootFileSystem for readOnlyRootFilesystem.)
func decodeStrict(doc []byte, v any) error {
	j, err := sigsyaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(j, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// splitYAML splits a multi-document file, dropping documents that hold
// only comments.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur []string
	flush := func() {
		doc := strings.Join(cur, "\n")
		cur = nil
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err == nil && v == nil {
			return
		}
		docs = append(docs, []byte(doc))
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.TrimRight(line, " \t\r") == "---" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return docs
}

// theStatefulSet returns the one StatefulSet and its skillreg container.
func theStatefulSet(t *testing.T, ms *manifests) (*appsv1.StatefulSet, *corev1.Container) {
	t.Helper()
	if len(ms.statefulSets) != 1 {
		t.Fatalf("want one StatefulSet, got %d", len(ms.statefulSets))
	}
	sts := ms.statefulSets[0]
	cs := sts.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("StatefulSet %s: want one container, got %d", sts.Name, len(cs))
	}
	return sts, &cs[0]
}

// containerPort resolves a probe's or Service's port (a number or a name)
// to one of the container's ports.
func containerPort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	ms := loadManifests(t)
	sts, c := theStatefulSet(t, ms)
	pod := &sts.Spec.Template.Spec
	podLabels := sts.Spec.Template.Labels

	t.Run("replicas", func(t *testing.T) {
		if sts.Spec.Replicas == nil || *sts.Spec.Replicas < 2 {
			t.Errorf("StatefulSet %s: replicas should be set above 1 (the example shows the multi-replica setup)", sts.Name)
		}
		if sts.Spec.Selector == nil || !selects(sts.Spec.Selector.MatchLabels, podLabels) {
			t.Errorf("StatefulSet %s: selector %v does not select the pod template's labels %v", sts.Name, sts.Spec.Selector, podLabels)
		}
	})

	args := parseServe(t, "StatefulSet "+sts.Name, c.Args)
	if len(c.Command) > 0 && !slices.Equal(c.Command, []string{"/skillreg"}) {
		t.Errorf("container command %q: leave it unset (the image's ENTRYPOINT is /skillreg)", c.Command)
	}
	port := listenPort(t, "StatefulSet", args["listen"])

	t.Run("ports", func(t *testing.T) {
		if host, _, _ := net.SplitHostPort(args["listen"]); host != "0.0.0.0" && host != "" && host != "::" {
			t.Errorf("--listen %s: in a pod the daemon must listen on every interface, not %s", args["listen"], host)
		}
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != int32(port) {
			t.Errorf("container ports %+v: want the one port of --listen, %d", c.Ports, port)
		}
		if p, ok := sts.Spec.Template.Annotations["prometheus.io/port"]; ok && p != strconv.Itoa(port) {
			t.Errorf("prometheus.io/port %s: want the listen port %d", p, port)
		}
	})

	t.Run("probes", func(t *testing.T) {
		probes := map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe}
		for name, p := range probes {
			if p == nil {
				if name != "startup" {
					t.Errorf("no %s probe", name)
				}
				continue
			}
			if p.HTTPGet == nil {
				t.Errorf("%s probe: want an HTTP GET", name)
				continue
			}
			if got, ok := containerPort(c, p.HTTPGet.Port); !ok || got != int32(port) {
				t.Errorf("%s probe port %s: want the listen port %d", name, p.HTTPGet.Port.String(), port)
			}
		}
		if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Path != "/readyz" {
			t.Errorf("readiness probe path %q: want /readyz (503 until the catalog is loaded)", p.HTTPGet.Path)
		}
		if p := c.LivenessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Path != "/healthz" {
			t.Errorf("liveness probe path %q: want /healthz (a slow first sync must not get the pod killed)", p.HTTPGet.Path)
		}
		// That the daemon answers these paths is checked by TestDaemonServesDeployments.
	})

	t.Run("volumes", func(t *testing.T) {
		volumes := map[string]*corev1.Volume{}
		for i := range pod.Volumes {
			volumes[pod.Volumes[i].Name] = &pod.Volumes[i]
		}
		claims := map[string]bool{}
		for _, vct := range sts.Spec.VolumeClaimTemplates {
			claims[vct.Name] = true
			if !slices.Contains(vct.Spec.AccessModes, corev1.ReadWriteOnce) && !slices.Contains(vct.Spec.AccessModes, corev1.ReadWriteOncePod) {
				t.Errorf("volume claim template %s: access modes %v; each replica owns its volume (ReadWriteOnce)", vct.Name, vct.Spec.AccessModes)
			}
			if _, ok := vct.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
				t.Errorf("volume claim template %s: no storage request", vct.Name)
			}
		}
		used := map[string]bool{}
		for _, m := range c.VolumeMounts {
			used[m.Name] = true
			if volumes[m.Name] == nil && !claims[m.Name] {
				t.Errorf("volume mount %s at %s: no volume or volume claim template of that name", m.Name, m.MountPath)
			}
		}
		for name := range volumes {
			if !used[name] {
				t.Errorf("volume %s is mounted nowhere", name)
			}
		}
		for name := range claims {
			if !used[name] {
				t.Errorf("volume claim template %s is mounted nowhere", name)
			}
		}
		// --data: on the replica's own claim (bbolt allows one daemon per
		// directory), writable, as the root file system is read-only.
		m := mountFor(c, args["data"])
		switch {
		case m == nil:
			t.Errorf("--data %s is on no volume mount: the read-only root file system would refuse the store", args["data"])
		case !claims[m.Name]:
			t.Errorf("--data %s is on volume %s, not a volume claim template: replicas would share or lose their store", args["data"], m.Name)
		case m.ReadOnly:
			t.Errorf("--data %s is mounted read-only", args["data"])
		}
		// --config: a file of the mounted ConfigMap.
		cm := mountFor(c, args["config"])
		if cm == nil || volumes[cm.Name] == nil || volumes[cm.Name].ConfigMap == nil {
			t.Fatalf("--config %s is not inside a ConfigMap volume mount", args["config"])
		}
		if cm.SubPath != "" {
			t.Errorf("config mount uses subPath: ConfigMap updates would never reach the file")
		}
		if key := configMapKeyAt(t, ms, volumes[cm.Name].ConfigMap, strings.TrimPrefix(args["config"], strings.TrimSuffix(cm.MountPath, "/")+"/")); key == "" {
			t.Errorf("--config %s: no ConfigMap key is mounted at that path", args["config"])
		}
		for name, v := range volumes {
			switch {
			case v.ConfigMap != nil:
				if ms.configMaps[v.ConfigMap.Name] == nil {
					t.Errorf("volume %s: ConfigMap %s is not defined", name, v.ConfigMap.Name)
				}
				for _, it := range v.ConfigMap.Items {
					if cmo := ms.configMaps[v.ConfigMap.Name]; cmo != nil {
						if _, ok := cmo.Data[it.Key]; !ok {
							t.Errorf("volume %s: ConfigMap %s has no key %s", name, v.ConfigMap.Name, it.Key)
						}
					}
				}
			case v.Secret != nil:
				s := ms.secrets[v.Secret.SecretName]
				if s == nil {
					t.Errorf("volume %s: Secret %s is not defined", name, v.Secret.SecretName)
				}
				for _, it := range v.Secret.Items {
					if s != nil && !secretHasKey(s, it.Key) {
						t.Errorf("volume %s: Secret %s has no key %s", name, s.Name, it.Key)
					}
				}
			}
		}
	})

	t.Run("references", func(t *testing.T) {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				if s := ms.secrets[r.Name]; s == nil {
					t.Errorf("env %s: Secret %s is not defined in the manifests", e.Name, r.Name)
				} else if !secretHasKey(s, r.Key) {
					t.Errorf("env %s: Secret %s has no key %s", e.Name, r.Name, r.Key)
				}
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				if cm := ms.configMaps[r.Name]; cm == nil {
					t.Errorf("env %s: ConfigMap %s is not defined in the manifests", e.Name, r.Name)
				} else if _, ok := cm.Data[r.Key]; !ok {
					t.Errorf("env %s: ConfigMap %s has no key %s", e.Name, r.Name, r.Key)
				}
			}
			if r := e.ValueFrom.ResourceFieldRef; r != nil && r.ContainerName != "" && r.ContainerName != c.Name {
				t.Errorf("env %s: resourceFieldRef names container %s", e.Name, r.ContainerName)
			}
		}
		for _, ef := range c.EnvFrom {
			if r := ef.SecretRef; r != nil && ms.secrets[r.Name] == nil {
				t.Errorf("envFrom: Secret %s is not defined", r.Name)
			}
			if r := ef.ConfigMapRef; r != nil && ms.configMaps[r.Name] == nil {
				t.Errorf("envFrom: ConfigMap %s is not defined", r.Name)
			}
		}
	})

	t.Run("front door", func(t *testing.T) {
		// The names in-cluster clients use for the Services, and the
		// kubelet's and Prometheus's view, must get through the Host check
		// and the metrics networks.
		cfg, _ := podConfig(t, ms, sts, c, args["config"])
		hosts := access.NewHosts(cfg.AllowedHosts())
		for _, svc := range ms.services {
			for _, name := range []string{svc.Name, svc.Name + ".ns.svc", svc.Name + ".ns.svc.cluster.local", "skillreg-0." + svc.Name + ".ns.svc.cluster.local"} {
				if !hosts.Allowed(name + ":80") {
					t.Errorf("Host %s (Service %s) is refused: add it to http.allowed_hosts", name, svc.Name)
				}
			}
		}
		if !hosts.Allowed("10.12.0.7:8080") {
			t.Error("a probe's Host (the pod IP) is refused")
		}
		if len(cfg.Clients) > 0 && sts.Spec.Template.Annotations["prometheus.io/scrape"] == "true" {
			nets := access.Networks(cfg.HTTP.MetricsNets)
			if !nets.Contains(netip.MustParseAddr("10.12.0.9")) {
				t.Error("with clients configured, Prometheus in the pod network gets 403 on /metrics: list the pod CIDR in http.metrics_networks")
			}
		}
	})

	t.Run("config", func(t *testing.T) {
		cfg, _ := podConfig(t, ms, sts, c, args["config"])
		secretEnv := map[string]bool{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				secretEnv[e.Name] = true
			}
		}
		need := map[string]string{
			"github.token_env":          cfg.GitHub.TokenEnv,
			"github.webhook_secret_env": cfg.GitHub.WebhookSecretEnv,
		}
		if len(cfg.Peers) > 0 {
			if f := cfg.PeersSecretFile; f != "" {
				if mountFor(c, f) == nil {
					t.Errorf("peers_secret_file %s is on no volume mount", f)
				}
			} else {
				need["peers_secret_env"] = cfg.PeersSecretEnv
			}
		}
		for i, s := range cfg.Sources {
			if s.Auth != nil && s.Auth.TokenEnv != "" {
				need[fmt.Sprintf("sources[%d].auth.token_env", i)] = s.Auth.TokenEnv
			}
			if s.Auth != nil && s.Auth.TokenFile != "" && mountFor(c, s.Auth.TokenFile) == nil {
				t.Errorf("sources[%d].auth.token_file %s is on no volume mount", i, s.Auth.TokenFile)
			}
		}
		if f := cfg.GitHub.WebhookSecretFile; f != "" && mountFor(c, f) == nil {
			t.Errorf("github.webhook_secret_file %s is on no volume mount", f)
		}
		for key, env := range need {
			if env == "" {
				t.Errorf("%s is not set: the example should show where the secret comes from", key)
			} else if !secretEnv[env] {
				t.Errorf("%s names %s, which the container does not get from a Secret", key, env)
			}
		}
		if cfg.DataDir != "" && cfg.DataDir != args["data"] {
			t.Errorf("config data_dir %s differs from --data %s (the flag wins; drop one)", cfg.DataDir, args["data"])
		}
		if len(cfg.Clients) == 0 {
			t.Errorf("no clients: a Service-reachable /mcp without tokens shows every skill to the whole cluster")
		}
		git := 0
		for _, s := range cfg.Sources {
			if s.URL == "" {
				t.Errorf("source %s is a local directory: a pod has none; use a git source", s.Name)
				continue
			}
			git++
			switch {
			case *sts.Spec.Replicas > 1 && len(cfg.Peers) == 0 && (s.Poll.D() <= 0 || s.Poll.D() > maxMultiReplicaPoll):
				t.Errorf("source %s polls every %v: with %d replicas and no peers the poll is the consistency window for replicas the webhook did not reach; keep it within %v",
					s.Name, s.Poll.D(), *sts.Spec.Replicas, maxMultiReplicaPoll)
			case s.Poll.D() <= 0 || s.Poll.D() > maxRelayedPoll:
				t.Errorf("source %s polls every %v: the poll heals a replica a webhook or its relay missed; keep it within %v",
					s.Name, s.Poll.D(), maxRelayedPoll)
			}
		}
		if git == 0 {
			t.Errorf("the example config has no git source")
		}
	})

	t.Run("services", func(t *testing.T) {
		var headless, clusterIP *corev1.Service
		for _, s := range ms.services {
			if !selects(s.Spec.Selector, podLabels) {
				t.Errorf("Service %s: selector %v does not select the pods (%v)", s.Name, s.Spec.Selector, podLabels)
			}
			for _, p := range s.Spec.Ports {
				tp := p.TargetPort
				if tp.Type == intstr.Int && tp.IntVal == 0 {
					tp = intstr.FromInt32(p.Port)
				}
				if got, ok := containerPort(c, tp); !ok || got != int32(port) {
					t.Errorf("Service %s port %d: target %s is not the listen port %d", s.Name, p.Port, tp.String(), port)
				}
			}
			if s.Spec.ClusterIP == corev1.ClusterIPNone {
				headless = s
			} else {
				clusterIP = s
			}
		}
		if headless == nil || headless.Name != sts.Spec.ServiceName {
			t.Errorf("StatefulSet serviceName %q: want a headless Service (clusterIP: None) of that name", sts.Spec.ServiceName)
		}
		if clusterIP == nil {
			t.Fatalf("no ClusterIP Service")
		}
		if clusterIP.Spec.Type != "" && clusterIP.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("Service %s: type %s, want ClusterIP", clusterIP.Name, clusterIP.Spec.Type)
		}
		if len(clusterIP.Spec.Ports) != 1 || clusterIP.Spec.Ports[0].Port != 80 {
			t.Errorf("Service %s: want one port, 80", clusterIP.Name)
		}
		if *sts.Spec.Replicas > 1 && clusterIP.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
			t.Errorf("Service %s: 2025-11-25 MCP sessions live in one replica's memory; with several replicas set sessionAffinity: ClientIP", clusterIP.Name)
		}
	})

	t.Run("disruption budget", func(t *testing.T) {
		if *sts.Spec.Replicas > 1 && len(ms.pdbs) != 1 {
			t.Fatalf("%d PodDisruptionBudgets: with %d replicas want one, so drains take replicas down one at a time", len(ms.pdbs), *sts.Spec.Replicas)
		}
		for _, pdb := range ms.pdbs {
			if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, podLabels) {
				t.Errorf("PodDisruptionBudget %s does not select the pods", pdb.Name)
			}
			// Down at once: at most one, and at least one (a budget that
			// allows none blocks every node drain).
			n := int(*sts.Spec.Replicas)
			var down int
			switch mu, ma := pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable; {
			case mu != nil && ma == nil:
				v, err := intstr.GetScaledValueFromIntOrPercent(mu, n, true)
				if err != nil {
					t.Fatalf("PodDisruptionBudget %s maxUnavailable %s: %v", pdb.Name, mu.String(), err)
				}
				down = v
			case ma != nil && mu == nil:
				v, err := intstr.GetScaledValueFromIntOrPercent(ma, n, true)
				if err != nil {
					t.Fatalf("PodDisruptionBudget %s minAvailable %s: %v", pdb.Name, ma.String(), err)
				}
				down = n - v
			default:
				t.Fatalf("PodDisruptionBudget %s: set one of maxUnavailable and minAvailable", pdb.Name)
			}
			if down != 1 {
				t.Errorf("PodDisruptionBudget %s lets %d of %d replicas down at once: want 1 (0 blocks drains, more leaves the Service short)", pdb.Name, down, n)
			}
		}
	})

	t.Run("spread", func(t *testing.T) {
		var host *corev1.TopologySpreadConstraint
		for i, tsc := range pod.TopologySpreadConstraints {
			if tsc.LabelSelector == nil || !selects(tsc.LabelSelector.MatchLabels, podLabels) || len(tsc.LabelSelector.MatchExpressions) > 0 {
				t.Errorf("topologySpreadConstraints[%d] (%s): its labelSelector must select the pods by their labels %v", i, tsc.TopologyKey, podLabels)
			}
			if tsc.MaxSkew != 1 {
				t.Errorf("topologySpreadConstraints[%d] (%s): maxSkew %d, want 1", i, tsc.TopologyKey, tsc.MaxSkew)
			}
			if tsc.TopologyKey == corev1.LabelHostname {
				host = &pod.TopologySpreadConstraints[i]
			}
		}
		if *sts.Spec.Replicas > 1 && host == nil {
			t.Fatalf("no topologySpreadConstraints on %s: replicas may share a node, and its loss takes them all", corev1.LabelHostname)
		}
		if host != nil && host.WhenUnsatisfiable == corev1.DoNotSchedule && (host.NodeTaintsPolicy == nil || *host.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor) {
			t.Errorf("the hostname spread is hard (DoNotSchedule) but counts tainted nodes: a replica evicted by a drain stays Pending; set nodeTaintsPolicy: Honor")
		}
	})

	t.Run("peers", func(t *testing.T) {
		cfg, _ := podConfig(t, ms, sts, c, args["config"])
		if *sts.Spec.Replicas > 1 && len(cfg.PeerAddrs) == 0 {
			t.Fatalf("no peers: with %d replicas a webhook reaches one; relay it to the others through the headless Service (dns:%s:PORT)", *sts.Spec.Replicas, sts.Spec.ServiceName)
		}
		var headless *corev1.Service
		for _, s := range ms.services {
			if s.Name == sts.Spec.ServiceName && s.Spec.ClusterIP == corev1.ClusterIPNone {
				headless = s
			}
		}
		for _, p := range cfg.PeerAddrs {
			if p.URL != "" {
				t.Errorf("peer %s: a pod's address changes when it is replaced; name the replicas by the headless Service (dns:%s:PORT)", p, sts.Spec.ServiceName)
				continue
			}
			if headless == nil || (p.DNSName != headless.Name && !strings.HasPrefix(p.DNSName, headless.Name+".")) {
				t.Errorf("peer %s: not the headless Service %s, whose name resolves to every replica", p, sts.Spec.ServiceName)
				continue
			}
			// A headless Service's DNS gives the pods' addresses: the port
			// must be the pods' listen port, which the Service's port names.
			ok := false
			for _, sp := range headless.Spec.Ports {
				tp := sp.TargetPort
				if tp.Type == intstr.Int && tp.IntVal == 0 {
					tp = intstr.FromInt32(sp.Port)
				}
				got, found := containerPort(c, tp)
				ok = ok || (found && int(sp.Port) == p.Port && got == int32(port))
			}
			if !ok || p.Port != port {
				t.Errorf("peer %s: port %d is not the listen port %d (a headless Service's name resolves to the pods themselves)", p, p.Port, port)
			}
		}
		if len(cfg.PeerAddrs) > 0 && (cfg.TLS.CertFile != "") != (cfg.PeersCAFile != "") {
			t.Errorf("tls and peers_ca_file: https peers are verified against peers_ca_file; set both or neither")
		}
	})

	t.Run("security", func(t *testing.T) {
		uid := imageUser(t)
		psc, sc := pod.SecurityContext, c.SecurityContext
		if sc == nil {
			t.Fatalf("container has no securityContext")
		}
		runAsNonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		if !runAsNonRoot {
			t.Errorf("runAsNonRoot is not set")
		}
		user := sc.RunAsUser
		if user == nil && psc != nil {
			user = psc.RunAsUser
		}
		if user == nil || *user != uid {
			t.Errorf("runAsUser %s: want the image's user %d, which owns the image's /data", ptrString(user), uid)
		}
		if psc == nil || psc.FSGroup == nil || *psc.FSGroup != uid {
			t.Errorf("pod fsGroup: want %d, so a fresh volume is writable by the user", uid)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("readOnlyRootFilesystem is not set")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("allowPrivilegeEscalation is not false")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("capabilities: drop ALL")
		}
	})

	t.Run("resources", func(t *testing.T) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okReq := c.Resources.Requests[r]
			lim, okLim := c.Resources.Limits[r]
			if !okReq || !okLim {
				t.Errorf("resources: %s needs a request and a limit", r)
				continue
			}
			if req.Cmp(lim) > 0 {
				t.Errorf("resources: %s request %s above its limit %s", r, req.String(), lim.String())
			}
		}
		for _, e := range c.Env {
			if e.Name != "GOMEMLIMIT" || e.Value == "" {
				continue
			}
			n, err := goMemLimit(e.Value)
			lim := c.Resources.Limits[corev1.ResourceMemory]
			if err != nil {
				t.Errorf("GOMEMLIMIT %q: %v", e.Value, err)
			} else if n >= lim.Value() {
				t.Errorf("GOMEMLIMIT %s is not below limits.memory %s", e.Value, lim.String())
			}
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if pod.TerminationGracePeriodSeconds != nil {
			grace = *pod.TerminationGracePeriodSeconds
		}
		var preStop int64
		if l := c.Lifecycle; l != nil && l.PreStop != nil {
			if l.PreStop.Sleep == nil {
				t.Errorf("preStop: the image has no shell or sleep binary; only the sleep action works")
			} else {
				preStop = l.PreStop.Sleep.Seconds
			}
		}
		if need := preStop + int64(daemonGrace/time.Second); grace <= need {
			t.Errorf("terminationGracePeriodSeconds %d: must exceed preStop %ds + the daemon's %v shutdown grace", grace, preStop, daemonGrace)
		}
	})

	t.Run("kustomization", func(t *testing.T) {
		var k struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Namespace  string `json:"namespace,omitempty"`
			Labels     []struct {
				Pairs            map[string]string `json:"pairs"`
				IncludeSelectors bool              `json:"includeSelectors,omitempty"`
				IncludeTemplates bool              `json:"includeTemplates,omitempty"`
			} `json:"labels,omitempty"`
			Resources []string `json:"resources"`
			Images    []struct {
				Name    string `json:"name"`
				NewName string `json:"newName,omitempty"`
				NewTag  string `json:"newTag,omitempty"`
				Digest  string `json:"digest,omitempty"`
			} `json:"images,omitempty"`
		}
		data, err := os.ReadFile(filepath.Join(kubeDir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeStrict(data, &k); err != nil {
			t.Fatalf("kustomization.yaml: %v", err)
		}
		if k.Kind != "Kustomization" {
			t.Errorf("kustomization.yaml: kind %q", k.Kind)
		}
		got, want := slices.Sorted(slices.Values(k.Resources)), slices.Sorted(slices.Values(ms.files))
		if !slices.Equal(got, want) {
			t.Errorf("kustomization resources %v, want every manifest: %v", got, want)
		}
		for _, l := range k.Labels {
			if l.IncludeSelectors {
				t.Errorf("kustomization labels with includeSelectors change the StatefulSet's immutable selector")
			}
		}
		image := c.Image
		if i := strings.LastIndexAny(image, ":@"); i > strings.LastIndex(image, "/") {
			image = image[:i]
		}
		for _, im := range k.Images {
			if im.Name != image {
				t.Errorf("kustomization images: %q is not the container's image %q", im.Name, image)
			}
		}
	})
}

func ptrString(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10)
}

// mountFor returns the container's volume mount that holds path.
func mountFor(c *corev1.Container, p string) *corev1.VolumeMount {
	var best *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		mp := strings.TrimSuffix(m.MountPath, "/")
		if (p == mp || strings.HasPrefix(p, mp+"/")) && (best == nil || len(mp) > len(best.MountPath)) {
			best = m
		}
	}
	return best
}

// configMapKeyAt returns the ConfigMap key a volume shows at file name rel.
func configMapKeyAt(t *testing.T, ms *manifests, v *corev1.ConfigMapVolumeSource, rel string) string {
	t.Helper()
	cm := ms.configMaps[v.Name]
	if cm == nil {
		t.Fatalf("ConfigMap %s is not defined", v.Name)
	}
	if len(v.Items) == 0 {
		if _, ok := cm.Data[rel]; ok {
			return rel
		}
		return ""
	}
	for _, it := range v.Items {
		if path.Clean(it.Path) == rel {
			if _, ok := cm.Data[it.Key]; ok {
				return it.Key
			}
		}
	}
	return ""
}

func secretHasKey(s *corev1.Secret, key string) bool {
	if _, ok := s.StringData[key]; ok {
		return true
	}
	_, ok := s.Data[key]
	return ok
}

func secretValue(s *corev1.Secret, key string) string {
	if v, ok := s.StringData[key]; ok {
		return v
	}
	return string(s.Data[key])
}

// podConfig loads the config file the pod reads with the daemon's loader.
func podConfig(t *testing.T, ms *manifests, sts *appsv1.StatefulSet, c *corev1.Container, file string) (*config.Config, string) {
	t.Helper()
	m := mountFor(c, file)
	if m == nil {
		t.Fatalf("--config %s is on no volume mount", file)
	}
	var v *corev1.Volume
	for i := range sts.Spec.Template.Spec.Volumes {
		if sts.Spec.Template.Spec.Volumes[i].Name == m.Name {
			v = &sts.Spec.Template.Spec.Volumes[i]
		}
	}
	if v == nil || v.ConfigMap == nil {
		t.Fatalf("--config %s is not in a ConfigMap volume", file)
	}
	key := configMapKeyAt(t, ms, v.ConfigMap, strings.TrimPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/"))
	if key == "" {
		t.Fatalf("--config %s: no ConfigMap key mounted there", file)
	}
	raw := ms.configMaps[v.ConfigMap.Name].Data[key]
	setPeersSecret(t, ms, c, raw)
	cfg, err := config.Parse([]byte(raw), path.Dir(file))
	if err != nil {
		t.Fatalf("ConfigMap %s key %s does not load with the daemon's config loader:\n%v", v.ConfigMap.Name, key, err)
	}
	return cfg, raw
}

// setPeersSecret puts the peer secret the pod gets from its Secret into
// this process's environment, under the name the config reads it from:
// the loader refuses peers without one, as the daemon in the pod would.
// (os.Setenv, not t.Setenv: the tests that load the config run in
// parallel, and they all set the same value.)
func setPeersSecret(t *testing.T, ms *manifests, c *corev1.Container, raw string) {
	t.Helper()
	var doc struct {
		Env string `yaml:"peers_secret_env"`
	}
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		return // the loader says what is wrong
	}
	name := cmp.Or(doc.Env, config.DefaultPeersSecretEnv)
	for _, e := range c.Env {
		if e.Name != name || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		r := e.ValueFrom.SecretKeyRef
		if s := ms.secrets[r.Name]; s != nil && secretHasKey(s, r.Key) {
			if err := os.Setenv(name, secretValue(s, r.Key)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// podEnv is the container's environment as the kubelet would set it.
func podEnv(t *testing.T, ms *manifests, c *corev1.Container) []string {
	t.Helper()
	var env []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			env = append(env, e.Name+"="+secretValue(ms.secrets[r.Name], r.Key))
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			env = append(env, e.Name+"="+ms.configMaps[r.Name].Data[r.Key])
		case e.ValueFrom.ResourceFieldRef != nil:
			r := e.ValueFrom.ResourceFieldRef
			q := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(r.Resource, "limits."))]
			if strings.HasPrefix(r.Resource, "requests.") {
				q = c.Resources.Requests[corev1.ResourceName(strings.TrimPrefix(r.Resource, "requests."))]
			}
			env = append(env, e.Name+"="+strconv.FormatInt(q.Value(), 10))
		default:
			t.Fatalf("env %s: this test does not know its source", e.Name)
		}
	}
	return env
}

var memLimitRE = regexp.MustCompile(`^(\d+)(B|KiB|MiB|GiB|TiB)?$`)

// goMemLimit parses a GOMEMLIMIT value the way the Go runtime documents it.
func goMemLimit(s string) (int64, error) {
	m := memLimitRE.FindStringSubmatch(s)
	if m == nil {
		return 0, errors.New("not a byte count such as 900MiB")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, err
	}
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	return n << shift, nil
}
