// salvo-h2-peer: the reference HTTP/2 provider client Salvo is measured against.
//
// It sends the way github.com/sideshow/apns2 sends: one http.Client over golang.org/x/net/http2's Transport
// (StrictMaxConcurrentStreams false, so the transport dials another connection whenever every open one has as
// many streams in flight as the server announced), TLS dialled with a 20 s timeout, a 15 s read-idle ping,
// a 60 s request timeout, and one request per notification from a pool of goroutines (5,000 by default).
//
// Exactly one request per row: a row is sent again only when its request provably never left the process
// (the connection it needed could not be dialled), and every such resend is counted. The transport's own
// replays of requests the server provably did not process (REFUSED_STREAM, a GOAWAY below the stream) are
// counted too (the request body is rewound once per replay).
//
// The result is one JSON line on standard output:
//
//	{"sent":…,"ok":…,"failed":{"reason":count},"wallSeconds":…,"rate":…,…}
//
// rate is ok ÷ wallSeconds, and wallSeconds runs from the start of main (before the files are read) to the
// line being written. Exit status: 0 every row answered 200, 1 some row not, 3 the job could not run (files,
// credentials), 64 wrong arguments, 130 interrupted (the line is still written, with "interrupted":true).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
)

// Apple's limits and apns2's defaults.
const (
	dialTimeout      = 20 * time.Second
	readIdleTimeout  = 15 * time.Second
	tcpKeepAlive     = 60 * time.Second
	maxDialAttempts  = 10
	dialRetryBackoff = 100 * time.Millisecond
)

type options struct {
	tokens            string
	column            string
	payload           string
	topic             string
	pushType          string
	priority          string
	cert              string
	key               string
	providerToken     string
	providerTokenFile string
	ca                string
	serverName        string
	gateway           string
	goroutines        int
	timeout           time.Duration
}

// usageError is a wrong argument (exit 64); inputError a file or credential that cannot be used (exit 3).
type usageError struct{ message string }

func (e usageError) Error() string { return e.message }

type inputError struct{ message string }

func (e inputError) Error() string { return e.message }

func parseOptions(arguments []string) (options, error) {
	var o options
	flags := flag.NewFlagSet("salvo-h2-peer", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.StringVar(&o.tokens, "tokens", "", "CSV of device tokens (hex), a header row naming the token column")
	flags.StringVar(&o.column, "column", "token", "the token column's header name")
	flags.StringVar(&o.payload, "payload", "", "the JSON payload file, the same for every row")
	flags.StringVar(&o.topic, "topic", "", "apns-topic")
	flags.StringVar(&o.pushType, "push-type", "alert", "apns-push-type")
	flags.StringVar(&o.priority, "priority", "", "apns-priority (left out by default)")
	flags.StringVar(&o.cert, "cert", "", "client certificate (PEM)")
	flags.StringVar(&o.key, "key", "", "client certificate's private key (PEM)")
	flags.StringVar(&o.providerToken, "provider-token", "", "provider token (JWT)")
	flags.StringVar(&o.providerTokenFile, "provider-token-file", "", "a file with the provider token: JSON with a \"token\" field, or the JWT itself")
	flags.StringVar(&o.ca, "ca", "", "CA certificates (PEM) to trust for the server")
	flags.StringVar(&o.serverName, "server-name", "", "the name the server's certificate must carry (default: the host)")
	flags.StringVar(&o.gateway, "gateway", "", "HOST:PORT")
	flags.IntVar(&o.goroutines, "goroutines", 5000, "requests in flight (one goroutine each)")
	flags.DurationVar(&o.timeout, "timeout", 60*time.Second, "the whole of one request")
	if err := flags.Parse(arguments); err != nil {
		return o, usageError{err.Error()}
	}
	if flags.NArg() > 0 {
		return o, usageError{fmt.Sprintf("unexpected argument %q", flags.Arg(0))}
	}
	switch {
	case o.tokens == "":
		return o, usageError{"-tokens is required"}
	case o.payload == "":
		return o, usageError{"-payload is required"}
	case o.topic == "":
		return o, usageError{"-topic is required"}
	case o.gateway == "":
		return o, usageError{"-gateway HOST:PORT is required"}
	case o.goroutines < 1 || o.goroutines > 1_000_000:
		return o, usageError{fmt.Sprintf("-goroutines is 1 to 1000000 (got %d)", o.goroutines)}
	case o.timeout <= 0:
		return o, usageError{"-timeout must be positive"}
	}
	certificate := o.cert != "" || o.key != ""
	token := o.providerToken != "" || o.providerTokenFile != ""
	if certificate == token {
		return o, usageError{"give either -cert and -key, or -provider-token or -provider-token-file"}
	}
	if certificate && (o.cert == "" || o.key == "") {
		return o, usageError{"-cert and -key go together"}
	}
	if o.providerToken != "" && o.providerTokenFile != "" {
		return o, usageError{"give -provider-token or -provider-token-file, not both"}
	}
	if _, _, err := net.SplitHostPort(o.gateway); err != nil {
		return o, usageError{fmt.Sprintf("-gateway %q is not HOST:PORT", o.gateway)}
	}
	return o, nil
}

// readTokens reads the token column of a CSV file: lowercase hex, 64 digits (spaces and <…> allowed, as Salvo
// reads them). A first row whose column holds the header name is the header; a file without one takes the first
// column. Any other row that is not a token is refused with its line.
func readTokens(path, column string) ([]string, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, inputError{err.Error()}
	}
	defer file.Close()
	reader := csv.NewReader(bufio.NewReaderSize(file, 1<<20))
	reader.FieldsPerRecord = -1
	reader.ReuseRecord = true
	index := 0
	var tokens []string
	for line := 1; ; line++ {
		record, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, inputError{fmt.Sprintf("%s: %v", path, err)}
		}
		if line == 1 {
			found := -1
			for i, name := range record {
				if strings.TrimSpace(strings.TrimPrefix(name, "\ufeff")) == column {
					found = i
				}
			}
			if found >= 0 {
				index = found
				continue
			}
		}
		if len(record) == 1 && strings.TrimSpace(record[0]) == "" {
			continue
		}
		if index >= len(record) {
			return nil, inputError{fmt.Sprintf("%s:%d: no column %d", path, line, index+1)}
		}
		token, ok := normalizeToken(record[index])
		if !ok {
			return nil, inputError{fmt.Sprintf("%s:%d: %q is not a 64-digit hex device token", path, line, record[index])}
		}
		tokens = append(tokens, token)
	}
	if len(tokens) == 0 {
		return nil, inputError{fmt.Sprintf("%s: no tokens", path)}
	}
	return tokens, nil
}

func normalizeToken(field string) (string, bool) {
	var b strings.Builder
	b.Grow(64)
	for _, c := range field {
		switch {
		case c == ' ' || c == '<' || c == '>' || c == '\t':
			continue
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			b.WriteRune(c)
		case c >= 'A' && c <= 'F':
			b.WriteRune(c + ('a' - 'A'))
		default:
			return "", false
		}
	}
	if b.Len() != 64 {
		return "", false
	}
	return b.String(), true
}

// readProviderToken takes the JWT from a `salvo token mint` file (JSON with a "token" field) or a file holding
// the JWT alone.
func readProviderToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", inputError{err.Error()}
	}
	text := strings.TrimSpace(string(data))
	if strings.HasPrefix(text, "{") {
		var file struct {
			Token string `json:"token"`
		}
		if err := json.Unmarshal([]byte(text), &file); err != nil {
			return "", inputError{fmt.Sprintf("%s: %v", path, err)}
		}
		text = file.Token
	}
	if strings.Count(text, ".") != 2 {
		return "", inputError{fmt.Sprintf("%s: no provider token (a JWT: three dot-separated parts)", path)}
	}
	return text, nil
}

// dialError marks an error from dialling a connection: the request that needed it never left the process.
type dialError struct{ err error }

func (e dialError) Error() string { return "dial: " + e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

type counters struct {
	sent             atomic.Int64
	ok               atomic.Int64
	dialRetries      atomic.Int64
	transportReplays atomic.Int64
	connections      atomic.Int64
	mutex            sync.Mutex
	failed           map[string]int64
}

func (c *counters) fail(reason string) {
	c.mutex.Lock()
	c.failed[reason]++
	c.mutex.Unlock()
}

type result struct {
	Sent             int64            `json:"sent"`
	OK               int64            `json:"ok"`
	Failed           map[string]int64 `json:"failed"`
	Unanswered       int64            `json:"unanswered"`
	WallSeconds      float64          `json:"wallSeconds"`
	Rate             float64          `json:"rate"`
	Rows             int              `json:"rows"`
	Goroutines       int              `json:"goroutines"`
	Connections      int64            `json:"connections"`
	DialRetries      int64            `json:"dialRetries"`
	TransportReplays int64            `json:"transportReplays"`
	Interrupted      bool             `json:"interrupted,omitempty"`
}

func (c *counters) result(start time.Time, rows, goroutines int, interrupted bool) result {
	wall := time.Since(start).Seconds()
	c.mutex.Lock()
	failed := make(map[string]int64, len(c.failed))
	var failures int64
	for reason, count := range c.failed {
		failed[reason] = count
		failures += count
	}
	c.mutex.Unlock()
	sent, ok := c.sent.Load(), c.ok.Load()
	return result{
		Sent: sent, OK: ok, Failed: failed, Unanswered: sent - ok - failures,
		WallSeconds: wall, Rate: float64(ok) / wall, Rows: rows, Goroutines: goroutines,
		Connections: c.connections.Load(), DialRetries: c.dialRetries.Load(),
		TransportReplays: c.transportReplays.Load(), Interrupted: interrupted,
	}
}

func printResult(r result) {
	line, _ := json.Marshal(r)
	os.Stdout.Write(append(line, '\n'))
}

func main() {
	start := time.Now()
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "salvo-h2-peer:", err)
		os.Exit(64)
	}
	status, err := run(o, start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "salvo-h2-peer:", err)
	}
	os.Exit(status)
}

func run(o options, start time.Time) (int, error) {
	tokens, err := readTokens(o.tokens, o.column)
	if err != nil {
		return 3, err
	}
	payload, err := os.ReadFile(o.payload)
	if err != nil {
		return 3, err
	}
	if len(payload) == 0 {
		return 3, fmt.Errorf("%s: empty payload", o.payload)
	}
	tlsConfig := &tls.Config{ServerName: o.serverName}
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return 3, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return 3, fmt.Errorf("%s: no PEM certificate", o.ca)
		}
		tlsConfig.RootCAs = pool
	}
	authorization := ""
	if o.cert != "" {
		pair, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return 3, fmt.Errorf("%s, %s: %v", o.cert, o.key, err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	} else {
		token := o.providerToken
		if o.providerTokenFile != "" {
			if token, err = readProviderToken(o.providerTokenFile); err != nil {
				return 3, err
			}
		}
		authorization = "bearer " + token
	}

	c := &counters{failed: map[string]int64{}}
	transport := &http2.Transport{
		TLSClientConfig: tlsConfig,
		ReadIdleTimeout: readIdleTimeout,
		DialTLS: func(network, addr string, cfg *tls.Config) (net.Conn, error) {
			dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: tcpKeepAlive}
			conn, err := tls.DialWithDialer(dialer, network, addr, cfg)
			if err != nil {
				return nil, dialError{err}
			}
			c.connections.Add(1)
			return conn, nil
		},
	}
	client := &http.Client{Transport: transport, Timeout: o.timeout}

	// Interrupted: the line is written with what is known, then the process exits.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-signals
		printResult(c.result(start, len(tokens), o.goroutines, true))
		os.Exit(130)
	}()

	prefix := "https://" + o.gateway + "/3/device/"
	var next atomic.Int64
	var group sync.WaitGroup
	goroutines := o.goroutines
	if goroutines > len(tokens) {
		goroutines = len(tokens)
	}
	for g := 0; g < goroutines; g++ {
		group.Add(1)
		go func() {
			defer group.Done()
			for {
				row := next.Add(1) - 1
				if row >= int64(len(tokens)) {
					return
				}
				c.sent.Add(1)
				send(client, c, prefix+tokens[row], payload, o, authorization)
			}
		}()
	}
	group.Wait()
	transport.CloseIdleConnections()
	r := c.result(start, len(tokens), o.goroutines, false)
	printResult(r)
	if r.OK != int64(len(tokens)) {
		return 1, nil
	}
	return 0, nil
}

// send makes one row's request, again only while the connection it needs cannot be dialled.
func send(client *http.Client, c *counters, url string, payload []byte, o options, authorization string) {
	for attempt := 1; ; attempt++ {
		request, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(payload))
		if err != nil {
			c.fail("request: " + err.Error())
			return
		}
		rewind := request.GetBody
		request.GetBody = func() (io.ReadCloser, error) {
			c.transportReplays.Add(1)
			return rewind()
		}
		header := request.Header
		header.Set("Content-Type", "application/json; charset=utf-8")
		header.Set("apns-topic", o.topic)
		header.Set("apns-push-type", o.pushType)
		if o.priority != "" {
			header.Set("apns-priority", o.priority)
		}
		if authorization != "" {
			header.Set("authorization", authorization)
		}
		response, err := client.Do(request)
		if err != nil {
			var dial dialError
			if errors.As(err, &dial) && attempt < maxDialAttempts {
				c.dialRetries.Add(1)
				time.Sleep(dialRetryBackoff)
				continue
			}
			c.fail(transportReason(err))
			return
		}
		if response.StatusCode == http.StatusOK {
			io.Copy(io.Discard, response.Body)
			response.Body.Close()
			c.ok.Add(1)
			return
		}
		var body struct {
			Reason string `json:"reason"`
		}
		json.NewDecoder(response.Body).Decode(&body)
		response.Body.Close()
		reason := body.Reason
		if reason == "" {
			reason = fmt.Sprintf("status %d", response.StatusCode)
		}
		c.fail(reason)
		return
	}
}

// transportReason names an error without a status: a few kinds, not one key per connection.
func transportReason(err error) string {
	var dial dialError
	var netError net.Error
	switch {
	case errors.As(err, &dial):
		return "transport: dial"
	case errors.As(err, &netError) && netError.Timeout():
		return "transport: timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "transport: connection closed"
	}
	var streamError http2.StreamError
	if errors.As(err, &streamError) {
		return "transport: stream " + streamError.Code.String()
	}
	var goAway http2.GoAwayError
	if errors.As(err, &goAway) {
		return "transport: GOAWAY " + goAway.ErrCode.String()
	}
	text := err.Error()
	if i := strings.LastIndex(text, ": "); i >= 0 {
		text = text[i+2:]
	}
	return "transport: " + text
}
