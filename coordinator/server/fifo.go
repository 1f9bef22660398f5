package server

// fifo is a queue of a group's held replies or reads. They leave from its
// front a few at a time, as each write of a batch is acknowledged on its
// own, while hundreds may wait behind them (a thousand members committing
// in one group, several batches in flight): shifting the rest down at
// every release cost a copy of all of them per reply. A drop moves the
// front instead, and the queued ones move down only when the buffer is
// full and at least half of it dropped, so each costs O(1) however many
// wait.
type fifo[T any] struct {
	buf  []T // buf[head:] are queued
	head int
}

// push queues v last.
func (q *fifo[T]) push(v T) {
	if q.head > 0 && len(q.buf) == cap(q.buf) && 2*q.head >= len(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, v)
}

// items returns what is queued, first first; it is valid until the next
// push or drop.
func (q *fifo[T]) items() []T { return q.buf[q.head:] }

// drop removes the first n queued, keeping no reference to them.
func (q *fifo[T]) drop(n int) {
	clear(q.buf[q.head : q.head+n])
	if q.head += n; q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
}

// reset removes everything queued.
func (q *fifo[T]) reset() { q.drop(len(q.buf) - q.head) }
