package epoch

import "strconv"

// Token is a fencing token: the group generation (classic protocol) or member
// epoch (KIP-848) at which the current owner of a partition received it.
//
// The coordinator hands out a token with every ownership and persists the
// group's generation before anyone learns it, so the token of a partition
// only grows: a new owner always holds a higher token than every earlier one,
// and an owner keeps its token for as long as it keeps the partition. A
// resource that remembers the highest token it has admitted for a partition
// and rejects anything lower (see [Fence]) therefore rejects every write from
// a former owner, however late that write arrives.
//
// The zero Token means "no token": it is never handed out with an ownership.
type Token int64

// None is the zero Token: no ownership.
const None Token = 0

// IsNone reports whether t is the zero token.
func (t Token) IsNone() bool { return t == None }

// Valid reports whether t can be carried by an ownership: tokens handed out
// are positive. Zero is [None], and negative values (Kafka sends generation
// -1 for "no generation") carry no ownership either; fences reject both with
// [ErrNoToken].
func (t Token) Valid() bool { return t > 0 }

// Less reports whether t is older than u.
func (t Token) Less(u Token) bool { return t < u }

// String renders the token as its decimal value, or "none".
func (t Token) String() string {
	if t == None {
		return "none"
	}
	return strconv.FormatInt(int64(t), 10)
}
