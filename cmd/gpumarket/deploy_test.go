package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpumarket/gpumarket/services/events/natstest"
	"github.com/gpumarket/gpumarket/services/rigauth"
)

// The deployment files in deploy/ are read here with the libraries their own tools use (compose-go for Compose,
// the Kubernetes API types for the manifests), and the environment they give each process is read by
// configFromEnv, as the process would read it. See docs/deploy.md.

// deployDir is the repository's deploy directory, from this package's directory.
const deployDir = "../../deploy"

// envNamesRead is every environment variable the repository's programs read: the names in its Go sources (not
// its tests) that look like one. A deployment file that sets another sets it for nothing.
func envNamesRead(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`"((?:GPUMARKET|GPUAGENT|STRIPE)_[A-Z0-9_]+|DATABASE_URL|NATS_URL)"`)
	names := map[string]bool{}
	for _, dir := range []string{"../../cmd", "../../web", "../../services", "../../db"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			for _, m := range re.FindAllSubmatch(b, -1) {
				names[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !names["GPUMARKET_STREAM_REPLICAS"] || !names["GPUAGENT_OFFERING_KEY"] {
		t.Fatalf("the scan of the sources found %d variable names, not the ones it must", len(names))
	}
	return names
}

// withEnv sets exactly env among the variables the platform reads, for configFromEnv.
func withEnv(t *testing.T, known map[string]bool, env map[string]string) {
	t.Helper()
	for name := range known {
		t.Setenv(name, "")
	}
	for name, v := range env {
		t.Setenv(name, v)
	}
}

// composeRigKey is GPUMARKET_RIG_KEY in composeSecrets.
var composeRigKey = strings.Repeat("r", 64)

// composeSecrets stand for what an operator puts in deploy/.env.
var composeSecrets = []string{
	"POSTGRES_PASSWORD=pg-secret",
	"GPUMARKET_TICKET_KEY=" + strings.Repeat("t", 64),
	"GPUMARKET_SESSION_KEY=" + strings.Repeat("s", 64),
	"STRIPE_WEBHOOK_SECRET=whsec_compose",
	"MINIO_ROOT_PASSWORD=minio-secret",
	"NATS_PLATFORM_PASSWORD=platform-nats-secret",
	"NATS_SYSTEM_PASSWORD=system-nats-secret",
	"GPUMARKET_RIG_KEY=" + composeRigKey,
	"NATS_AUTH_CALLOUT_ISSUER=" + must(rigauth.IssuerPublicKey([]byte(composeRigKey))),
	"GPUMARKET_RIG_NATS_URL=wss://rigs.example.com:443,wss://rigs.example.com:8444,wss://rigs.example.com:8445",
	"RIG1_OFFERING_ID=off-1", "RIG1_NATS_PASSWORD=rig-1-own-password",
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func loadCompose(t *testing.T, env []string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(deployDir, "compose.yaml")},
		cli.WithEnv(env), cli.WithProfiles([]string{"rigs"}), cli.WithWorkingDirectory(deployDir))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// flagValue is the value after flag in a command line.
func flagValue(cmd []string, flag string) string {
	if i := slices.Index(cmd, flag); i >= 0 && i+1 < len(cmd) {
		return cmd[i+1]
	}
	return ""
}

// TestComposeRunsAClusteredPlatform: deploy/compose.yaml, as Compose loads it, runs PostgreSQL, three NATS nodes
// with JetStream clustered with one another, two replicas of the web and gateway (roles web,gateway in each
// process), one meter, stripe-mock and two
// simulated rigs; each platform process's environment starts the platform in its role on that cluster with
// three stream replicas, and the file refuses to load without its secrets.
func TestComposeRunsAClusteredPlatform(t *testing.T) {
	if _, err := loadCompose(t, nil); err == nil || !strings.Contains(err.Error(), "POSTGRES_PASSWORD") {
		t.Errorf("compose.yaml loads without its secrets: %v; want an error naming the first missing", err)
	}
	p, err := loadCompose(t, composeSecrets)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"postgres", "nats-1", "nats-2", "nats-3", "stripe-mock", "minio", "minio-bucket", "migrate", "web", "meter",
		"rig-1", "rig-1-backend", "rig-2", "rig-2-backend"} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The NATS nodes, each deploy/nats/nats.conf read by nats-server with the node's environment: distinct names
	// and stores, one cluster, each routing to all three route ports, the rigs' entry point with TLS.
	envOf := func(name string) map[string]string {
		out := map[string]string{}
		for k, v := range p.Services[name].Environment {
			if v != nil {
				out[k] = *v
			}
		}
		return out
	}
	var natsNodes []string
	nodes := map[string]*server.Options{}
	clusterNames, stores := map[string]bool{}, map[string]bool{}
	for _, name := range []string{"nats-1", "nats-2", "nats-3"} {
		s := p.Services[name]
		o := natsNodeOptions(t, s, envOf(name))
		nodes[name] = o
		if !o.JetStream || o.StoreDir == "" {
			t.Errorf("%s runs without JetStream on a store: %+v", name, o)
		}
		if o.ServerName != name {
			t.Errorf("%s is named %q in the cluster", name, o.ServerName)
		}
		clusterNames[o.Cluster.Name] = true
		var routes []string
		for _, r := range o.Routes {
			routes = append(routes, r.String())
		}
		for _, peer := range []string{"nats-1", "nats-2", "nats-3"} {
			if !slices.Contains(routes, "nats://"+peer+":6222") {
				t.Errorf("%s has no route to %s: %q", name, peer, routes)
			}
		}
		if o.Cluster.Port != 6222 || o.Port != 4222 {
			t.Errorf("%s listens for routes on %d and clients on %d, not 6222 and 4222", name, o.Cluster.Port, o.Port)
		}
		for _, v := range s.Volumes {
			if v.Target == o.StoreDir {
				stores[v.Source] = true
			}
		}
		if o.Websocket.TLSConfig == nil || !slices.ContainsFunc(s.Ports, func(pc types.ServicePortConfig) bool {
			return pc.Target == uint32(o.Websocket.Port) && pc.Published != ""
		}) {
			t.Errorf("%s's rigs' entry point: TLS %v on port %d, published as %+v; want wss:// published on the host",
				name, o.Websocket.TLSConfig != nil, o.Websocket.Port, s.Ports)
		}
		natsNodes = append(natsNodes, "nats://"+name+":4222")
	}
	if len(clusterNames) != 1 || clusterNames[""] {
		t.Errorf("the NATS nodes are in clusters %v, want one", clusterNames)
	}
	if len(stores) != 3 {
		t.Errorf("the NATS nodes keep JetStream on %d volumes, want one each: %v", len(stores), stores)
	}

	if web := p.Services["web"]; web.GetScale() != 2 {
		t.Errorf("%d web replicas, want 2", web.GetScale())
	}
	if meter := p.Services["meter"]; meter.GetScale() != 1 || !slices.Equal([]string(meter.Command), []string{"meter"}) {
		t.Errorf("the meter runs %d replicas of %q, want one of `meter`", meter.GetScale(), meter.Command)
	}

	// Every variable the file sets is one a program reads, and each platform process's environment starts it as
	// it should.
	known := envNamesRead(t)
	natsVars := natsConfigVariables(t)
	for name, s := range p.Services {
		for k := range s.Environment {
			if strings.HasPrefix(k, "POSTGRES_") && name == "postgres" || strings.HasPrefix(k, "MINIO_") && name == "minio" ||
				strings.HasPrefix(k, "MC_HOST_") && name == "minio-bucket" || natsVars[k] && strings.HasPrefix(name, "nats-") {
				continue
			}
			if !known[k] {
				t.Errorf("service %s sets %s, which nothing reads", name, k)
			}
		}
	}
	for _, tc := range []struct {
		service string
		roles   Roles
	}{{"web", Roles{Web: true, Gateway: true}}, {"meter", Roles{Meter: true}}} {
		env := envOf(tc.service)
		withEnv(t, known, env)
		c, err := configFromEnv()
		if err != nil {
			t.Errorf("%s: %v", tc.service, err)
			continue
		}
		if tc.service == "meter" {
			c.Roles = Roles{Meter: true} // what `gpumarket meter` does
		}
		if c.Roles != tc.roles {
			t.Errorf("%s runs roles %s, want %s", tc.service, c.Roles, tc.roles)
		}
		if err := c.requireServe(); err != nil {
			t.Errorf("%s would not start: %v", tc.service, err)
		}
		if c.StreamReplicas != 3 {
			t.Errorf("%s makes streams of %d replicas, want 3", tc.service, c.StreamReplicas)
		}
		if got := strings.Split(withoutUserInfo(c.NATSURL), ","); !slices.Equal(got, natsNodes) {
			t.Errorf("%s connects to NATS at %q, want the three nodes %q", tc.service, got, natsNodes)
		}
		// As the platform's own user, which every node has in the platform's account, and bypasses the callout.
		checkNATSUser(t, tc.service+"'s NATS_URL", c.NATSURL, nodes, "PLATFORM")
		if !strings.Contains(c.DatabaseURL, "@postgres:5432/") || !strings.Contains(c.DatabaseURL, "pg-secret") {
			t.Errorf("%s's database is %q, not the postgres service with its password", tc.service, c.DatabaseURL)
		}
		if tc.service == "web" {
			// Both replicas keep batch files in MinIO's bucket, which minio-bucket makes, with MinIO's own key.
			if s3 := c.BatchS3; s3.Endpoint != "http://minio:9000" || s3.Bucket != "gpumarket-batches" || s3.SecretKey != "minio-secret" ||
				s3.AccessKey != envOf("minio")["MINIO_ROOT_USER"] {
				t.Errorf("web's batch files: %+v, want MinIO's bucket with its root key", s3)
			}
			if mb := p.Services["minio-bucket"]; !slices.Contains([]string(mb.Command), "minio/"+c.BatchS3.Bucket) ||
				envOf("minio-bucket")["MC_HOST_minio"] != "http://gpumarket:minio-secret@minio:9000" {
				t.Errorf("minio-bucket makes %q with %q", mb.Command, envOf("minio-bucket")["MC_HOST_minio"])
			}
			// The web replicas answer the auth callout with the key the nodes trust, close rigs' connections as the
			// system account's user, and show providers the entry point.
			if issuer := must(rigauth.IssuerPublicKey(c.RigKey)); nodes["nats-1"].AuthCallout == nil || nodes["nats-1"].AuthCallout.Issuer != issuer {
				t.Errorf("the NATS nodes' auth callout %+v does not trust the web's key %s", nodes["nats-1"].AuthCallout, issuer)
			}
			if got := strings.Split(withoutUserInfo(c.NATSSystemURL), ","); !slices.Equal(got, natsNodes) {
				t.Errorf("web closes rigs' connections through %q, want the three nodes", got)
			}
			checkNATSUser(t, "web's GPUMARKET_NATS_SYSTEM_URL", c.NATSSystemURL, nodes, "SYS")
			if !strings.HasPrefix(c.RigNATSURL, "wss://") {
				t.Errorf("providers are shown %q, want the wss:// entry point", c.RigNATSURL)
			}
			if test, err := c.paymentsMode(); !test || err != nil || c.StripeAPIURL != "http://stripe-mock:12111" {
				t.Errorf("web's payments: test mode %v (%v) on %q, want stripe-mock's", test, err, c.StripeAPIURL)
			}
		}
	}
	if a, b := envOf("web")["GPUMARKET_TICKET_KEY"], envOf("meter")["GPUMARKET_TICKET_KEY"]; a == "" || a != b {
		t.Error("the gateway and the meter do not share the key that signs route tickets")
	}
	for _, rig := range []string{"rig-1", "rig-2"} {
		env := envOf(rig)
		if got := strings.Split(env["NATS_URL"], ","); !slices.Equal(got, natsNodes) {
			t.Errorf("%s publishes usage to %q, want the three nodes", rig, got)
		}
		// A rig holds its own credential and nothing of the platform's.
		for k, v := range env {
			for _, secret := range []string{"platform-nats-secret", "system-nats-secret", composeRigKey} {
				if strings.Contains(v, secret) {
					t.Errorf("%s's %s holds a platform secret", rig, k)
				}
			}
		}
		if !strings.HasPrefix(env["GPUAGENT_UPSTREAM"], "http://"+rig+"-backend:") {
			t.Errorf("%s forwards to %q, not its simbackend", rig, env["GPUAGENT_UPSTREAM"])
		}
	}
}

// natsConfigVariables are the environment variables deploy/nats/nats.conf reads ($NAME).
func natsConfigVariables(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "nats", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`).FindAllStringSubmatch(line, -1) {
			names[m[1]] = true
		}
	}
	return names
}

// natsNodeOptions is deploy/nats/nats.conf as nats-server reads it with a Compose NATS service's environment; the
// file is the one the service mounts where its command reads it, and its certificate paths are in the directory
// the service mounts (they are replaced by a certificate made here, which nats-server loads as it reads the file).
func natsNodeOptions(t *testing.T, s types.ServiceConfig, env map[string]string) *server.Options {
	t.Helper()
	conf := flagValue(s.Command, "-c")
	var mounted, tlsDir bool
	for _, v := range s.Volumes {
		switch {
		case v.Target == conf && filepath.Base(v.Source) == "nats.conf" && filepath.Base(filepath.Dir(v.Source)) == "nats":
			mounted = true
		case env["NATS_RIGS_TLS_CERT"] != "" && filepath.Dir(env["NATS_RIGS_TLS_CERT"]) == v.Target &&
			filepath.Dir(env["NATS_RIGS_TLS_KEY"]) == v.Target:
			tlsDir = true
		}
	}
	if !mounted || !tlsDir {
		t.Fatalf("%s: the configuration %q mounted from deploy/nats/nats.conf: %v; the certificate's directory mounted: %v (%+v)",
			s.Name, conf, mounted, tlsDir, s.Volumes)
	}
	cert, key := natstest.WriteCertificate(t, t.TempDir())
	env["NATS_RIGS_TLS_CERT"], env["NATS_RIGS_TLS_KEY"] = cert, key
	for k, v := range env {
		t.Setenv(k, v)
	}
	o, err := server.ProcessConfigFile(filepath.Join(deployDir, "nats", "nats.conf"))
	if err != nil {
		t.Fatalf("%s: deploy/nats/nats.conf: %v", s.Name, err)
	}
	return o
}

// checkNATSUser checks that the user and password of every URL in a comma-separated list are a user of that account
// on every node, and one the auth callout lets through without asking.
func checkNATSUser(t *testing.T, what, urls string, nodes map[string]*server.Options, account string) {
	t.Helper()
	for _, raw := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.User == nil {
			t.Errorf("%s: %q has no user", what, raw)
			continue
		}
		password, _ := u.User.Password()
		for name, o := range nodes {
			i := slices.IndexFunc(o.Users, func(x *server.User) bool { return x.Username == u.User.Username() })
			if i < 0 || o.Users[i].Password != password || o.Users[i].Account == nil || o.Users[i].Account.Name != account {
				t.Errorf("%s: %s has no user %q with that password in account %s", what, name, u.User.Username(), account)
			}
			if o.AuthCallout == nil || !slices.Contains(o.AuthCallout.AuthUsers, u.User.Username()) {
				t.Errorf("%s: %s puts user %q to the auth callout", what, name, u.User.Username())
			}
		}
	}
}

// manifest is one object of a Kubernetes manifest file.
type manifest struct {
	Kind string `json:"kind"`
	doc  []byte
}

// readManifests splits the manifest files kustomization.yaml lists into their objects.
func readManifests(t *testing.T) []manifest {
	t.Helper()
	dir := filepath.Join(deployDir, "k8s")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Resources) == 0 {
		t.Fatal("kustomization.yaml lists no resources")
	}
	var out []manifest
	for _, file := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var m manifest
			if err := yaml.Unmarshal(doc, &m); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if m.Kind != "" {
				m.doc = doc
				out = append(out, m)
			}
		}
	}
	return out
}

// TestKubernetesManifestsProbeAndConfigureEachRole: the Deployments of deploy/k8s, read as the API's types,
// run the web (two replicas), the gateway (two) and the meter (one) from the image, one role each, probe liveness on /healthz and readiness on
// /readyz at the port the process listens on, take PostgreSQL's URL and the keys from the Secret, and with the
// ConfigMap's values start the platform in their role on the NATS cluster with three stream replicas; each
// Service selects a Deployment's Pods; the Ingress sends /v1 and every path under it to the gateway's Service
// and every other path to the web's; the web and the gateway keep batch files on one S3 bucket; and the NATS
// chart's values make a cluster of three with JetStream on file storage.
func TestKubernetesManifestsProbeAndConfigureEachRole(t *testing.T) {
	known := envNamesRead(t)
	var deployments []appsv1.Deployment
	var services []corev1.Service
	configMaps := map[string]map[string]string{}
	var ingresses []networkingv1.Ingress
	for _, m := range readManifests(t) {
		var err error
		switch m.Kind {
		case "Deployment":
			var d appsv1.Deployment
			err = yaml.UnmarshalStrict(m.doc, &d)
			deployments = append(deployments, d)
		case "Service":
			var s corev1.Service
			err = yaml.UnmarshalStrict(m.doc, &s)
			services = append(services, s)
		case "ConfigMap":
			var c corev1.ConfigMap
			err = yaml.UnmarshalStrict(m.doc, &c)
			configMaps[c.Name] = c.Data
		case "Ingress":
			var in networkingv1.Ingress
			err = yaml.UnmarshalStrict(m.doc, &in)
			ingresses = append(ingresses, in)
		default:
			t.Errorf("unexpected %s in the manifests", m.Kind)
		}
		if err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
	}
	secret := readSecretExample(t)
	batchStores := map[string]bool{}

	want := map[string]struct {
		replicas int32
		roles    Roles
	}{"gpumarket-web": {2, Roles{Web: true}}, "gpumarket-gateway": {2, Roles{Gateway: true}}, "gpumarket-meter": {1, Roles{Meter: true}}}
	if len(deployments) != len(want) {
		t.Errorf("%d Deployments, want %d", len(deployments), len(want))
	}
	for _, d := range deployments {
		w, ok := want[d.Name]
		if !ok {
			t.Errorf("unexpected Deployment %s", d.Name)
			continue
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != w.replicas {
			t.Errorf("%s: replicas %v, want %d", d.Name, ptrText(d.Spec.Replicas), w.replicas)
		}
		if len(d.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", d.Name, len(d.Spec.Template.Spec.Containers))
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != "gpumarket" { // kustomization.yaml's images: sets the registry and tag
			t.Errorf("%s: image %q, want gpumarket", d.Name, c.Image)
		}
		for k, v := range d.Spec.Selector.MatchLabels {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("%s: its selector does not select its Pods", d.Name)
			}
		}

		// The environment as the kubelet makes it: the ConfigMap, then env, with the Secret's values.
		env := map[string]string{}
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef == nil || configMaps[from.ConfigMapRef.Name] == nil {
				t.Fatalf("%s: envFrom %+v names no ConfigMap of the manifests", d.Name, from)
			}
			for k, v := range configMaps[from.ConfigMapRef.Name] {
				env[k] = v
			}
		}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				env[e.Name] = e.Value
			case e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secret.Name:
				v, ok := secret.StringData[e.ValueFrom.SecretKeyRef.Key]
				if !ok {
					t.Errorf("%s: %s from key %q, which the Secret does not have", d.Name, e.Name, e.ValueFrom.SecretKeyRef.Key)
				}
				env[e.Name] = v
			default:
				t.Errorf("%s: %s comes from %+v, not the Secret %s", d.Name, e.Name, e.ValueFrom, secret.Name)
			}
		}
		for k := range env {
			if !known[k] {
				t.Errorf("%s sets %s, which nothing reads", d.Name, k)
			}
		}
		if env["DATABASE_URL"] == "" {
			t.Errorf("%s: no DATABASE_URL", d.Name)
		}
		withEnv(t, known, env)
		cfg, err := configFromEnv()
		if err != nil {
			t.Errorf("%s: %v", d.Name, err)
			continue
		}
		if slices.Equal(c.Args, []string{"meter"}) {
			cfg.Roles = Roles{Meter: true}
		} else if !slices.Equal(c.Args, []string{"serve"}) {
			t.Errorf("%s runs %q, want serve or meter", d.Name, c.Args)
		}
		if cfg.Roles != w.roles {
			t.Errorf("%s runs roles %s, want %s", d.Name, cfg.Roles, w.roles)
		}
		if err := cfg.requireServe(); err != nil {
			t.Errorf("%s would not start: %v", d.Name, err)
		}
		if cfg.StreamReplicas != 3 || cfg.NATSURL == "" {
			t.Errorf("%s: streams of %d replicas on NATS %q, want 3 on the cluster", d.Name, cfg.StreamReplicas, cfg.NATSURL)
		}
		// The web and the gateway each have their own /data, so the batch files are on one S3 bucket for both.
		if cfg.Roles.Web || cfg.Roles.Gateway {
			if s3 := cfg.BatchS3; s3.Endpoint == "" || s3.Bucket == "" || s3.AccessKey == "" || s3.SecretKey == "" {
				t.Errorf("%s keeps batch files in its own /data: %+v", d.Name, s3)
			} else {
				batchStores[s3.Endpoint+"/"+s3.Bucket] = true
			}
		}

		// The probes reach the port the process listens on (GPUMARKET_ADDR), by name or number.
		port := strings.TrimPrefix(cfg.Addr, ":")
		portName := ""
		for _, p := range c.Ports {
			if p.ContainerPort > 0 && strings.TrimPrefix(cfg.Addr, ":") == strconv.Itoa(int(p.ContainerPort)) {
				portName = p.Name
			}
		}
		probe := func(kind string, pr *corev1.Probe, path string) {
			if pr == nil || pr.HTTPGet == nil {
				t.Errorf("%s: no %s probe over HTTP", d.Name, kind)
				return
			}
			if pr.HTTPGet.Path != path {
				t.Errorf("%s: %s probe on %s, want %s", d.Name, kind, pr.HTTPGet.Path, path)
			}
			if p := pr.HTTPGet.Port.String(); p != port && (portName == "" || p != portName) {
				t.Errorf("%s: %s probe on port %s; the process listens on %s", d.Name, kind, p, cfg.Addr)
			}
		}
		probe("liveness", c.LivenessProbe, "/healthz")
		probe("readiness", c.ReadinessProbe, "/readyz")
		if c.StartupProbe != nil {
			probe("startup", c.StartupProbe, "/healthz")
		}
	}
	if len(batchStores) != 1 {
		t.Errorf("the web and the gateway keep batch files on %v, want one bucket", batchStores)
	}

	for _, s := range services {
		selected := false
		for _, d := range deployments {
			matches := len(s.Spec.Selector) > 0
			for k, v := range s.Spec.Selector {
				matches = matches && d.Spec.Template.Labels[k] == v
			}
			selected = selected || matches
		}
		if !selected {
			t.Errorf("Service %s selects no Deployment's Pods", s.Name)
		}
	}

	// The Ingress: a path's Service is the one its longest matching Prefix names, as the Ingress API defines it.
	serviceNamed := map[string]corev1.Service{}
	for _, s := range services {
		serviceNamed[s.Name] = s
	}
	if len(ingresses) != 1 || len(ingresses[0].Spec.Rules) != 1 || ingresses[0].Spec.Rules[0].HTTP == nil {
		t.Fatalf("%d Ingresses, want one with one rule of HTTP paths", len(ingresses))
	}
	paths := ingresses[0].Spec.Rules[0].HTTP.Paths
	for _, p := range paths {
		if p.PathType == nil || *p.PathType != networkingv1.PathTypePrefix {
			t.Errorf("Ingress path %s is not of type Prefix", p.Path)
		}
		svc, ok := serviceNamed[p.Backend.Service.Name]
		if !ok {
			t.Errorf("Ingress path %s goes to Service %q, which the manifests do not have", p.Path, p.Backend.Service.Name)
			continue
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == p.Backend.Service.Port.Name }) {
			t.Errorf("Ingress path %s goes to port %q of %s, which it does not have", p.Path, p.Backend.Service.Port.Name, svc.Name)
		}
	}
	backendOf := func(path string) string {
		best, name := -1, ""
		for _, p := range paths {
			prefix := strings.TrimSuffix(p.Path, "/")
			if (path == prefix || strings.HasPrefix(path, prefix+"/") || prefix == "") && len(prefix) > best {
				best, name = len(prefix), p.Backend.Service.Name
			}
		}
		return name
	}
	for path, want := range map[string]string{"/v1": "gpumarket-gateway", "/v1/chat/completions": "gpumarket-gateway",
		"/v1/batches/b1/cancel": "gpumarket-gateway", "/": "gpumarket-web", "/api/offerings": "gpumarket-web",
		"/keys": "gpumarket-web", "/v10": "gpumarket-web", "/v1x/models": "gpumarket-web", "/healthz": "gpumarket-web"} {
		if got := backendOf(path); got != want {
			t.Errorf("the Ingress sends %s to %q, want %s", path, got, want)
		}
	}

	// The NATS chart's values: a cluster of three, JetStream on file storage on a volume per node.
	b, err := os.ReadFile(filepath.Join(deployDir, "k8s", "nats-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config struct {
			Cluster struct {
				Enabled  bool `json:"enabled"`
				Replicas int  `json:"replicas"`
			} `json:"cluster"`
			JetStream struct {
				Enabled   bool `json:"enabled"`
				FileStore struct {
					Enabled bool `json:"enabled"`
					PVC     struct {
						Enabled bool   `json:"enabled"`
						Size    string `json:"size"`
					} `json:"pvc"`
				} `json:"fileStore"`
			} `json:"jetstream"`
			Websocket struct {
				Enabled bool `json:"enabled"`
				Port    int  `json:"port"`
				TLS     struct {
					Enabled    bool   `json:"enabled"`
					SecretName string `json:"secretName"`
				} `json:"tls"`
			} `json:"websocket"`
			Merge map[string]any `json:"merge"`
		} `json:"config"`
		Container struct {
			Env map[string]corev1.EnvVar `json:"env"`
		} `json:"container"`
		ExtraResources []corev1.Service `json:"extraResources"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	c := values.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 {
		t.Errorf("the NATS chart runs cluster %v of %d nodes, want a cluster of 3", c.Cluster.Enabled, c.Cluster.Replicas)
	}
	if !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled || !c.JetStream.FileStore.PVC.Enabled || c.JetStream.FileStore.PVC.Size == "" {
		t.Errorf("the NATS chart's JetStream %+v, want file storage on a persistent volume", c.JetStream)
	}
	// The rigs' entry point: wss:// with a certificate, reached from outside on 443 and on nothing else.
	if !c.Websocket.Enabled || !c.Websocket.TLS.Enabled || c.Websocket.TLS.SecretName == "" {
		t.Errorf("the NATS chart's WebSocket %+v, want one with TLS", c.Websocket)
	}
	if len(values.ExtraResources) != 1 || len(values.ExtraResources[0].Spec.Ports) != 1 ||
		values.ExtraResources[0].Spec.Ports[0].Port != 443 || values.ExtraResources[0].Spec.Ports[0].TargetPort.IntValue() != c.Websocket.Port {
		t.Errorf("the rigs reach NATS through %+v, want one Service from 443 to the WebSocket port %d only", values.ExtraResources, c.Websocket.Port)
	}
	// The accounts, users and auth callout are deploy/nats/nats.conf's, and their secrets come from the Secret.
	merged := natsConfigFromChartMerge(t, c.Merge)
	file := natsConfigSections(t, filepath.Join(deployDir, "nats", "nats.conf"))
	for _, section := range []string{"accounts", "system_account", "authorization"} {
		if !reflect.DeepEqual(merged[section], file[section]) {
			t.Errorf("the NATS chart's %s:\n%v\ndeploy/nats/nats.conf's:\n%v", section, merged[section], file[section])
		}
	}
	for name, key := range map[string]string{"NATS_PLATFORM_PASSWORD": "nats-platform-password",
		"NATS_SYSTEM_PASSWORD": "nats-system-password", "NATS_AUTH_CALLOUT_ISSUER": "nats-auth-callout-issuer"} {
		e := values.Container.Env[name]
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret.Name || secret.StringData[key] == "" ||
			e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("the NATS chart's %s comes from %+v, want the Secret's %s", name, e.ValueFrom, key)
		}
	}
	// The platform's processes connect as the users the chart's configuration has.
	platform, _ := url.Parse(secret.StringData["nats-url"])
	system, _ := url.Parse(secret.StringData["nats-system-url"])
	if pw, _ := platform.User.Password(); platform.User.Username() != "gpumarket" || pw != secret.StringData["nats-platform-password"] {
		t.Errorf("the Secret's nats-url is not the platform's NATS user with nats-platform-password")
	}
	if pw, _ := system.User.Password(); system.User.Username() != "system" || pw != secret.StringData["nats-system-password"] {
		t.Errorf("the Secret's nats-system-url is not the system account's NATS user with nats-system-password")
	}
}

// natsConfigVariableValues are values for every variable deploy/nats/nats.conf reads, for parsing it.
func natsConfigVariableValues(t *testing.T) {
	t.Helper()
	for name := range natsConfigVariables(t) {
		t.Setenv(name, "v"+strings.ToLower(name))
	}
	for _, port := range []string{"NATS_CLIENT_PORT", "NATS_HTTP_PORT", "NATS_CLUSTER_PORT", "NATS_RIGS_PORT"} {
		t.Setenv(port, "4222")
	}
	t.Setenv("NATS_ROUTES", "[nats://a:6222]")
}

// natsConfigSections is a NATS configuration file as nats-server's parser reads it, its variables given values.
func natsConfigSections(t *testing.T, path string) map[string]any {
	t.Helper()
	natsConfigVariableValues(t)
	m, err := conf.ParseFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// natsConfigFromChartMerge is the NATS configuration the chart writes for config.merge, parsed: the chart writes
// the values as JSON (which nats-server reads), with "<< $NAME >>" unquoted.
func natsConfigFromChartMerge(t *testing.T, merge map[string]any) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(merge); err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`"<< (\$[A-Z_]+) >>"`).ReplaceAllString(buf.String(), "$1")
	path := filepath.Join(t.TempDir(), "merge.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return natsConfigSections(t, path)
}

func ptrText(n *int32) string {
	if n == nil {
		return "unset"
	}
	return strconv.Itoa(int(*n))
}

// readSecretExample is deploy/k8s/secret.example.yaml, the keys the Deployments read.
func readSecretExample(t *testing.T) corev1.Secret {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "k8s", "secret.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Kind != "Secret" || len(s.StringData) == 0 {
		t.Fatalf("secret.example.yaml is a %s with %d keys", s.Kind, len(s.StringData))
	}
	return s
}

// TestDeployImageBuilds builds deploy/Dockerfile with docker or podman where one is installed.
func TestDeployImageBuilds(t *testing.T) {
	tool := ""
	for _, name := range []string{"docker", "podman"} {
		if _, err := exec.LookPath(name); err != nil {
			continue
		}
		// The client alone builds nothing: the daemon (docker) or the runtime (podman) must answer.
		if err := exec.Command(name, "info").Run(); err != nil {
			t.Logf("%s is installed but `%s info` fails (%v): not used", name, name, err)
			continue
		}
		tool = name
		break
	}
	if tool == "" {
		t.Skip("no docker daemon or podman answers here: deploy/Dockerfile is not built")
	}
	if testing.Short() {
		t.Skip("-short: building the image takes minutes")
	}
	cmd := exec.Command(tool, "build", "-f", filepath.Join(deployDir, "Dockerfile"), "-t", "gpumarket:test", "../..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s build: %v\n%s", tool, err, out)
	}
	for _, bin := range []string{"/gpumarket", "/gpuagent", "/simbackend"} {
		out, err := exec.Command(tool, "run", "--rm", "--entrypoint", bin, "gpumarket:test", "-h").CombinedOutput()
		if !strings.Contains(string(out), "usage") && !strings.Contains(string(out), "Usage") {
			t.Errorf("%s -h in the image: %v\n%s", bin, err, out)
		}
	}
}
