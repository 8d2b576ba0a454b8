package tridentrest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/server"
)

// ClientCertName is the common name of the client certificate Trident's
// installer issues to node plugins; the node API admits no other.
const ClientCertName = "trident-node"

// TLSFiles are the PEM files of the HTTPS server (Trident's --https_ca_cert,
// --https_server_cert, --https_server_key; /certs/caCert, serverCert,
// serverKey from the trident-csi Secret).
type TLSFiles struct {
	CACert, Cert, Key string
}

// ListenMutualTLS serves h on addr over TLS, admitting only clients whose
// certificate the CA signed for ClientCertName, as Trident's controller
// does. The files are read now: a controller without them cannot register
// any node, and must say so at start.
func ListenMutualTLS(addr string, files TLSFiles, h http.Handler) (*server.HTTPServer, error) {
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		return nil, fmt.Errorf("HTTPS server certificate (%s, %s): %w", files.Cert, files.Key, err)
	}
	caPEM, err := os.ReadFile(files.CACert)
	if err != nil {
		return nil, fmt.Errorf("HTTPS CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("HTTPS CA certificate %s holds no PEM certificate", files.CACert)
	}
	conf := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return serve(tls.NewListener(l, conf), requireNodeCert(h), "HTTPS node API"), nil
}

// Listen serves h on addr over plain HTTP.
func Listen(addr string, h http.Handler) (*server.HTTPServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return serve(l, h, "HTTP REST"), nil
}

func serve(l net.Listener, h http.Handler, what string) *server.HTTPServer {
	return server.ServeHTTP(&http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       90 * time.Second, // Trident's HTTPTimeout
		WriteTimeout:      90 * time.Second,
		// Failed handshakes (a client without a certificate) are
		// worth a debug line, not stderr noise.
		ErrorLog: log.New(logrus.StandardLogger().WriterLevel(logrus.DebugLevel), what+": ", 0),
	}, l, what)
}

// requireNodeCert admits only the node plugins' client certificate: the CA
// also signed the server's, which must not be usable as a client.
func requireNodeCert(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != ClientCertName {
			w.Header().Set("WWW-Authenticate", `Basic realm="trident"`)
			reply(w, "unauthorized", http.StatusUnauthorized, errorResponse{Error: "a client certificate for " + ClientCertName + " is required"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
