// The latency half of Benchmarks/service.sh in Go, so that the client's own delay stays out of the figure: one
// notification a request, POST /v1/notifications at a fixed rate on keep-alive HTTP/1.1 connections, each request
// started on its schedule by a goroutine of its own; then each notification's outcome (GET /v1/notifications/{id}
// ?wait=30) and, for those delivered, the time from the request's schedule (and from its write) to Apple's answer as
// the service recorded it (`answered_at`), beside the service's own time from `accepted_at`. Prints one line in the
// shape Benchmarks/service-client.py prints (service.sh reads its p99). Loopback only; every wait is bounded.
//
//	go run service-latency.go -url URL -key KEY -payload FILE -rate 1000 -seconds 20 -phase 0
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

type record struct {
	scheduled, written, answered time.Time
	id                           string
}

type outcome struct {
	State      string `json:"state"`
	AcceptedAt string `json:"accepted_at"`
	AnsweredAt string `json:"answered_at"`
}

func percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	index := int(float64(len(sorted)-1) * p / 100)
	return sorted[index]
}

func milliseconds(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func main() {
	url := flag.String("url", "", "the service's base URL")
	key := flag.String("key", "", "an API key")
	payloadFile := flag.String("payload", "", "the payload's JSON file")
	rate := flag.Float64("rate", 1000, "notifications a second")
	seconds := flag.Float64("seconds", 20, "how long")
	phase := flag.Int("phase", 0, "a number in the tokens, so that each phase sends tokens of its own")
	connections := flag.Int("connections", 64, "keep-alive connections at most")
	flag.Parse()
	raw, err := os.ReadFile(*payloadFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	payload := compact.String()
	client := &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns: *connections, MaxIdleConnsPerHost: *connections, MaxConnsPerHost: *connections,
			DisableCompression: true,
		},
	}
	count := int(*rate * *seconds)
	records := make([]*record, count)
	var failures []string
	var lock sync.Mutex
	var group sync.WaitGroup
	start := time.Now().Add(50 * time.Millisecond)
	for index := 0; index < count; index++ {
		due := start.Add(time.Duration(float64(index) / *rate * float64(time.Second)))
		time.Sleep(time.Until(due))
		group.Add(1)
		go func(index int, scheduled time.Time) {
			defer group.Done()
			token := fmt.Sprintf("1a7e%036x%024x", *phase, index)
			body := fmt.Sprintf(`{"notifications":[{"token":"%s","payload":%s}]}`, token, payload)
			request, _ := http.NewRequest("POST", *url+"/v1/notifications", strings.NewReader(body))
			request.Header.Set("Authorization", "Bearer "+*key)
			request.Header.Set("Content-Type", "application/json")
			written := time.Now()
			response, err := client.Do(request)
			if err != nil {
				lock.Lock()
				failures = append(failures, err.Error())
				lock.Unlock()
				return
			}
			answer, _ := io.ReadAll(response.Body)
			response.Body.Close()
			answered := time.Now()
			if response.StatusCode != 202 {
				lock.Lock()
				failures = append(failures, fmt.Sprintf("%d %.200s", response.StatusCode, answer))
				lock.Unlock()
				return
			}
			var accepted struct {
				Notifications []struct {
					ID string `json:"id"`
				} `json:"notifications"`
			}
			if json.Unmarshal(answer, &accepted) != nil || len(accepted.Notifications) != 1 {
				lock.Lock()
				failures = append(failures, fmt.Sprintf("no id in %.200s", answer))
				lock.Unlock()
				return
			}
			records[index] = &record{scheduled, written, answered, accepted.Notifications[0].ID}
		}(index, due)
	}
	group.Wait()
	sentSeconds := time.Since(start).Seconds()

	outcomes := make([]*outcome, count)
	limit := make(chan struct{}, *connections)
	for index, r := range records {
		if r == nil {
			continue
		}
		group.Add(1)
		limit <- struct{}{}
		go func(index int, id string) {
			defer group.Done()
			defer func() { <-limit }()
			request, _ := http.NewRequest("GET", *url+"/v1/notifications/"+id+"?wait=30", nil)
			request.Header.Set("Authorization", "Bearer "+*key)
			response, err := client.Do(request)
			if err != nil {
				return
			}
			defer response.Body.Close()
			var result outcome
			if response.StatusCode == 200 && json.NewDecoder(response.Body).Decode(&result) == nil {
				outcomes[index] = &result
			}
		}(index, r.id)
	}
	group.Wait()

	var fromSchedule, fromWrite, inService, posts, lags []float64
	states := map[string]int{}
	for index, r := range records {
		if r == nil {
			continue
		}
		o := outcomes[index]
		if o == nil {
			states["unknown"]++
			continue
		}
		states[o.State]++
		lags = append(lags, milliseconds(r.written.Sub(r.scheduled)))
		posts = append(posts, milliseconds(r.answered.Sub(r.written)))
		answeredAt, err1 := time.Parse(time.RFC3339Nano, o.AnsweredAt)
		acceptedAt, err2 := time.Parse(time.RFC3339Nano, o.AcceptedAt)
		if o.State == "delivered" && err1 == nil && err2 == nil {
			fromSchedule = append(fromSchedule, milliseconds(answeredAt.Sub(r.scheduled)))
			fromWrite = append(fromWrite, milliseconds(answeredAt.Sub(r.written)))
			inService = append(inService, milliseconds(answeredAt.Sub(acceptedAt)))
		}
	}
	keys := make([]string, 0, len(states))
	for k := range states {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, states[k]))
	}
	line := fmt.Sprintf("notifications %d in %.1f s (%.0f/s) states %s", count, sentSeconds,
		float64(count)/sentSeconds, strings.Join(parts, ","))
	if len(failures) > 0 {
		line += fmt.Sprintf(" refused %d (first: %s)", len(failures), failures[0])
	}
	fmt.Println(line)
	maximum := 0.0
	for _, v := range fromSchedule {
		if v > maximum {
			maximum = v
		}
	}
	maximumLag := 0.0
	for _, v := range lags {
		if v > maximumLag {
			maximumLag = v
		}
	}
	fmt.Printf("request to answer p50 %.1f ms p99 %.1f ms max %.1f ms (from the write: p50 %.1f p99 %.1f; "+
		"accepted_at to answered_at: p50 %.1f p99 %.1f; the 202: p50 %.1f p99 %.1f; client lag p99 %.1f max %.1f)\n",
		percentile(fromSchedule, 50), percentile(fromSchedule, 99), maximum,
		percentile(fromWrite, 50), percentile(fromWrite, 99),
		percentile(inService, 50), percentile(inService, 99),
		percentile(posts, 50), percentile(posts, 99),
		percentile(lags, 99), maximumLag)
}
