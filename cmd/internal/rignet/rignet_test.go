package rignet_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cmd/internal/rignet"
)

// The test binary runs itself inside the namespace to play the rig's side: GPUMARKET_RIGNET_DO says what to do.
func TestMain(m *testing.M) {
	switch do := os.Getenv("GPUMARKET_RIGNET_DO"); {
	case strings.HasPrefix(do, "dial "):
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(do, "dial "), 2*time.Second)
		if err != nil {
			fmt.Println("refused:", err)
			os.Exit(0)
		}
		fmt.Fprintln(c, "hello from the rig")
		c.Close()
		fmt.Println("connected")
		os.Exit(0)
	case strings.HasPrefix(do, "listen "):
		ln, err := net.Listen("tcp", strings.TrimPrefix(do, "listen "))
		if err != nil {
			fmt.Println("cannot listen:", err)
			os.Exit(1)
		}
		fmt.Println("listening", ln.Addr())
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			fmt.Fprintln(c, "inside")
			c.Close()
		}
	}
	os.Exit(m.Run())
}

func inHome(t *testing.T, h *rignet.Home, do string) string {
	t.Helper()
	cmd := h.Command(context.Background(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GPUMARKET_RIGNET_DO="+do)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in the namespace: %v: %s", do, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestARigAtHomeDialsOutAndNothingDialsIn(t *testing.T) {
	h := rignet.New(t)

	// The platform listens on its end of the link: the rig reaches it.
	platform, err := net.Listen("tcp", net.JoinHostPort(h.PlatformIP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer platform.Close()
	got := make(chan string, 1)
	go func() {
		c, err := platform.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	if out := inHome(t, h, "dial "+platform.Addr().String()); out != "connected" {
		t.Fatalf("the rig could not dial the platform: %s", out)
	}
	if line := <-got; line != "hello from the rig" {
		t.Fatalf("the platform read %q", line)
	}

	// Nowhere else: the machine's loopback inside the namespace is the namespace's own, and there is no
	// default route.
	if out := inHome(t, h, "dial 192.0.2.1:80"); !strings.HasPrefix(out, "refused:") {
		t.Fatalf("the rig reached an address beyond the platform: %s", out)
	}
	routes, err := h.Routes()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(routes, "default") {
		t.Fatalf("the namespace has a default route:\n%s", routes)
	}

	// Nothing dials in, even to a port something listens on inside.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listener := h.Command(ctx, os.Args[0], "-test.run=^$")
	listener.Env = append(os.Environ(), "GPUMARKET_RIGNET_DO=listen "+net.JoinHostPort(h.RigIP.String(), "7000"))
	stdout, err := listener.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = listener.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); !strings.HasPrefix(line, "listening") {
		t.Fatalf("the listener inside did not start: %q", line)
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(h.RigIP.String(), "7000"), time.Second)
	if err == nil {
		c.Close()
		t.Fatal("a connection into the rig's home was accepted")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Logf("dialling in failed with %v (dropped packets time out; any failure will do)", err)
	}
}
