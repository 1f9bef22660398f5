package check

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The files of a run folder (see the package documentation).
const (
	RunFile      = "run.json"
	AttemptsDir  = "attempts"
	RowsFile     = "rows.jsonl"
	HistoryFile  = "history.jsonl"
	RevTimesFile = "revtimes.jsonl"
	OffsetsFile  = "offsets.jsonl"
	// CallbacksFile is optional: a run without stock consumers' callbacks
	// (or a folder of an older runner) has none.
	CallbacksFile = "callbacks.jsonl"
)

// maxLine bounds one JSON line (a history value is at most etcd's request
// size, 8 MiB with the embedded etcd; base64 makes it 4/3 of that).
const maxLine = 12 << 20

// Load reads the run folder dir. Every file must exist (the JSONL files
// may be empty, attempts/ may hold no file). A malformed line is an
// error naming its file and line, except the last line of an attempt log
// when it does not end in a newline: a worker killed with SIGKILL may
// leave one torn line, which is skipped with a note.
func Load(dir string) (*Input, error) {
	in := &Input{}
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	if err := json.Unmarshal(b, &in.Run); err != nil {
		return nil, fmt.Errorf("check: %s: %w", filepath.Join(dir, RunFile), err)
	}
	logs, err := os.ReadDir(filepath.Join(dir, AttemptsDir))
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	for _, e := range logs {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		path := filepath.Join(dir, AttemptsDir, e.Name())
		as, note, err := readJSONL[Attempt](path, true)
		if err != nil {
			return nil, err
		}
		in.Attempts = append(in.Attempts, as...)
		if note != "" {
			in.Notes = append(in.Notes, note)
		}
	}
	if in.Rows, _, err = readJSONL[Row](filepath.Join(dir, RowsFile), false); err != nil {
		return nil, err
	}
	if in.History, _, err = readJSONL[KV](filepath.Join(dir, HistoryFile), false); err != nil {
		return nil, err
	}
	if in.RevTimes, _, err = readJSONL[RevTime](filepath.Join(dir, RevTimesFile), false); err != nil {
		return nil, err
	}
	if in.Offsets, _, err = readJSONL[OffsetOp](filepath.Join(dir, OffsetsFile), false); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, CallbacksFile)); err == nil {
		if in.Callbacks, _, err = readJSONL[Callback](filepath.Join(dir, CallbacksFile), false); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// readJSONL decodes one value per non-empty line of path. With torn, a
// last line without a newline that does not decode is skipped, and note
// says so.
func readJSONL[T any](path string, torn bool) (out []T, note string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("check: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, rerr := readLine(r)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, "", fmt.Errorf("check: %s:%d: %w", path, n, rerr)
		}
		last := errors.Is(rerr, io.EOF)
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			var v T
			if err := json.Unmarshal(trimmed, &v); err != nil {
				if torn && last {
					return out, fmt.Sprintf("%s:%d: torn last line skipped (%v)", path, n, err), nil
				}
				return nil, "", fmt.Errorf("check: %s:%d: %w", path, n, err)
			}
			out = append(out, v)
		}
		if last {
			return out, "", nil
		}
	}
}

// readLine returns the next line without its newline, and io.EOF with the
// last line if the file does not end in one (or an empty line at the end).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("line longer than %d bytes", maxLine)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

// Write writes in as the run folder dir, creating it: the counterpart of
// Load, for runners that collect everything in memory. The attempts go to
// one log per worker, attempts/<worker>.jsonl (attempts/_.jsonl for those
// without a worker), in their order in in.Attempts. Notes are not written.
func Write(dir string, in *Input) error {
	if err := os.MkdirAll(filepath.Join(dir, AttemptsDir), 0o755); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	b, err := json.MarshalIndent(in.Run, "", "  ")
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, RunFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	byWorker := make(map[string][]Attempt)
	for _, a := range in.Attempts {
		byWorker[a.Worker] = append(byWorker[a.Worker], a)
	}
	for w, as := range byWorker {
		name := w
		if name == "" {
			name = "_"
		}
		if err := writeFile(filepath.Join(dir, AttemptsDir, fileSafe(name)+".jsonl"), as); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(dir, RowsFile), in.Rows); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, HistoryFile), in.History); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, RevTimesFile), in.RevTimes); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, OffsetsFile), in.Offsets); err != nil {
		return err
	}
	if len(in.Callbacks) == 0 {
		return nil
	}
	return writeFile(filepath.Join(dir, CallbacksFile), in.Callbacks)
}

func writeFile[T any](path string, vs []T) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("check: %w", cerr)
		}
	}()
	w := bufio.NewWriter(f)
	if err := WriteJSONL(w, vs); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

// WriteJSONL writes vs to w, one JSON value a line: the form of the run
// folder's .jsonl files, for runners that stream them.
func WriteJSONL[T any](w io.Writer, vs []T) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
	return nil
}

// fileSafe maps a name to one safe path component.
func fileSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '-' || c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}

// sortedKeys returns m's keys sorted.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
