// The OCI registry the local clusters pull taintkeeper's image and chart from (hack/registry.py):
// go-containerregistry's registry handler, served over TLS on one address, blobs on disk.
//
//	registry --address 127.0.0.1:0 --disk DIR --cert CERT --key KEY --ready-file FILE
//
// It writes the address it listens on to --ready-file once it accepts connections. Manifests and tags
// are kept in memory: a restarted registry has none until they are pushed again.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	address := flag.String("address", "127.0.0.1:0", "address to listen on")
	disk := flag.String("disk", "", "directory the blobs are kept in")
	cert := flag.String("cert", "", "TLS certificate (PEM)")
	key := flag.String("key", "", "TLS private key (PEM)")
	ready := flag.String("ready-file", "", "file the listening address is written to once serving")
	flag.Parse()
	if *disk == "" || *cert == "" || *key == "" {
		fmt.Fprintln(os.Stderr, "registry: --disk, --cert and --key are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*disk, 0o755); err != nil {
		log.Fatalf("registry: %v", err)
	}
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		log.Fatalf("registry: %v", err)
	}
	server := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(*disk))),
		// HTTP/1.1 only: the registry reads an upload's body under one lock, so over HTTP/2 (one connection,
		// streams sharing its flow-control window) two concurrent layer uploads wait on each other for ever.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	done := make(chan error, 1)
	go func() { done <- server.ServeTLS(listener, *cert, *key) }()
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte(listener.Addr().String()+"\n"), 0o644); err != nil {
			log.Fatalf("registry: %v", err)
		}
	}
	log.Printf("registry: serving https://%s, blobs in %s", listener.Addr(), *disk)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-done:
		log.Fatalf("registry: %v", err)
	case <-signals:
		_ = server.Close()
	}
}
