package etcdstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The key layout, under the prefix p (docs/STORE.md):
//
//	p meta/format                         the store's format version
//	p meta/shards                         the shard count, fixed (1: unsharded)
//	p meta/fence                          the fence (fence.go), unsharded
//	p meta/shards/<s>/fence               shard s's fence
//	p topics/<name>                       TopicRecord
//	p groups/<g>/group                    GroupRecord (a tombstone if deleted)
//	p groups/<g>/members/<member>         MemberRecord
//	p groups/<g>/assignments/<member>     AssignmentRecord
//	p groups/<g>/offsets/<topic>/<part>   OffsetRecord (folded from batches)
//	p groups/<g>/obatch/<store>-<seq>     a batch of the group's offset writes (batch.go)
//	p shards/<s>/groups/<g>/...           the same, of shard s (Shard)
//	p log/<g>/<epoch>                     GenerationRecord (10 digits)
//	p users/<user>/<mechanism>            a SASL user's SCRAM credential (users.go)
//	p acls/<type>/<pattern>/<name>/<principal>/<host>/<op>/<perm>
//	                                      an ACL binding (acls.go), empty
//
// Names are escaped (escape) so that no component holds a '/': a group's
// keys are exactly those with its directory as prefix. Partitions and
// shards are decimal; Load sorts numerically, so "10" after "9" in etcd's
// byte order does not matter. A sharded layout has no groups/ directory:
// every group is in one shard's, and the generation logs, topics, users
// and ACLs are every shard's.
const (
	metaDir    = "meta/"
	formatKey  = metaDir + "format"
	shardsKey  = metaDir + "shards"
	fenceKey   = metaDir + "fence"
	signingKey = metaDir + "keys"
	fenceLeaf  = "fence"
	topicsDir  = "topics/"
	shardsDir  = "shards/"
	groupsDir  = "groups/"
	groupLeaf  = "group"
	membersDir = "members/"
	assignDir  = "assignments/"
	offsetsDir = "offsets/"
	obatchDir  = "obatch/"
	logDir     = "log/"
	usersDir   = "users/"
	aclsDir    = "acls/"
)

// keys builds and parses the keys of one prefix, and of one shard of it
// for the group keys and the fence.
type keys struct {
	prefix  string
	sharded bool
	shard   int
	groups  string // the directory of the groups' directories
	fenceK  string
}

// newKeys returns the keys of shard index of count under prefix; count 1
// is the unsharded layout.
func newKeys(prefix string, index, count int) keys {
	if count <= 1 {
		return keys{prefix: prefix, groups: prefix + groupsDir, fenceK: prefix + fenceKey}
	}
	shard := strconv.Itoa(index)
	return keys{
		prefix:  prefix,
		sharded: true,
		shard:   index,
		groups:  prefix + shardsDir + shard + "/" + groupsDir,
		fenceK:  prefix + shardsKey + "/" + shard + "/" + fenceLeaf,
	}
}

// prefixKeys returns the keys of prefix for what every shard shares
// (topics, users, ACLs, logs) and for parsing any key of the prefix.
func prefixKeys(prefix string) keys { return newKeys(prefix, 0, 1) }

func (k keys) format() string     { return k.prefix + formatKey }
func (k keys) shardCount() string { return k.prefix + shardsKey }
func (k keys) fence() string      { return k.fenceK }

// signing is the key of the grant-signing key ring (signing.go).
func (k keys) signing() string { return k.prefix + signingKey }

// ownsGroup reports whether a group key parsed as pk is one of k's shard.
func (k keys) ownsGroup(pk parsedKey) bool { return pk.sharded == k.sharded && pk.shard == k.shard }

func (k keys) topic(name string) string { return k.prefix + topicsDir + escape(name) }

// user is the key of user's credential for mechanism (a SASL mechanism
// name, which needs no escaping: validMechanismKey).
func (k keys) user(user, mechanism string) string {
	return k.prefix + usersDir + escape(user) + "/" + mechanism
}

// validMechanismKey reports whether m may be the last component of a user
// key: a SASL mechanism name (RFC 4422: A-Z, 0-9, '-' and '_', at most 20
// characters).
func validMechanismKey(m string) bool {
	if m == "" || len(m) > 20 {
		return false
	}
	for i := 0; i < len(m); i++ {
		if c := m[i]; !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// groupDir is the directory of every key of group g.
func (k keys) groupDir(g string) string { return k.groups + escape(g) + "/" }

func (k keys) group(g string) string { return k.groupDir(g) + groupLeaf }

func (k keys) member(g, id string) string { return k.groupDir(g) + membersDir + escape(id) }

func (k keys) assignment(g, id string) string { return k.groupDir(g) + assignDir + escape(id) }

// offset is built in one allocation: every offset commit makes one.
func (k keys) offset(g, topic string, partition int32) string {
	var b strings.Builder
	b.Grow(len(k.groups) + escapedLen(g) + 1 + len(offsetsDir) + escapedLen(topic) + 1 + 11)
	b.WriteString(k.groups)
	escapeTo(&b, g)
	b.WriteByte('/')
	b.WriteString(offsetsDir)
	escapeTo(&b, topic)
	b.WriteByte('/')
	var num [11]byte
	b.Write(strconv.AppendInt(num[:0], int64(partition), 10))
	return b.String()
}

// offsetBatch is the key of the batch id of group g's offset writes.
func (k keys) offsetBatch(g, id string) string { return k.groupDir(g) + obatchDir + id }

// offsetBatchDir is the directory of group g's offset batches.
func (k keys) offsetBatchDir(g string) string { return k.groupDir(g) + obatchDir }

// offsetDir is the directory of group g's partition offset keys.
func (k keys) offsetDir(g string) string { return k.groupDir(g) + offsetsDir }

// logDir is the directory of group g's generation log. It is apart from
// the group's directory: the log outlives a deletion of the group, and
// Load skips it.
func (k keys) logDir(g string) string { return k.prefix + logDir + escape(g) + "/" }

// logEntry is the key of the entry for epoch in group g's log; epochs are
// zero-padded so that keys sort as epochs do.
func (k keys) logEntry(g string, epoch int32) string {
	return k.logDir(g) + fmt.Sprintf("%010d", epoch)
}

// groupRest returns the ranges that hold every key of group g except its
// GroupRecord: [dir, dir+"group") and (dir+"group", end of dir). A group
// deletion deletes them and overwrites the GroupRecord with its tombstone,
// so it is three operations, and never more whatever the layout grows.
func (k keys) groupRest(g string) [2]keyRange {
	dir := k.groupDir(g)
	gk := dir + groupLeaf
	return [2]keyRange{{dir, gk}, {gk + "\x00", prefixEnd(dir)}}
}

// loadRanges returns the ranges a whole load reads: the unsharded layout's
// prefix around the generation logs, which are history (LoadLog), not
// state; a shard's topics and groups, and none of the other shards' keys.
func (k keys) loadRanges() []keyRange {
	if !k.sharded {
		logs := k.prefix + logDir
		return []keyRange{{k.prefix, logs}, {prefixEnd(logs), prefixEnd(k.prefix)}}
	}
	topics := k.prefix + topicsDir
	return []keyRange{{topics, prefixEnd(topics)}, {k.groups, prefixEnd(k.groups)}}
}

// keyRange is the keys in [start, end).
type keyRange struct{ start, end string }

func (r keyRange) contains(key string) bool { return key >= r.start && key < r.end }

// prefixEnd returns the smallest key above every key with prefix p (p must
// end in a byte below 0xff, which the prefixes here do: '/').
func prefixEnd(p string) string {
	b := []byte(p)
	b[len(b)-1]++
	return string(b)
}

// keyKind is what a key under the prefix holds.
type keyKind uint8

const (
	kindMeta keyKind = iota + 1
	kindTopic
	kindGroup
	kindMember
	kindAssignment
	kindOffset
	kindOffsetBatch // name: the batch's ID
	kindLog
	kindUser
	kindACL
)

// parsedKey is a key taken apart.
type parsedKey struct {
	kind      keyKind
	sharded   bool // a group key of a sharded layout, of shard shard
	shard     int
	group     string
	name      string // topic (kindTopic, kindOffset), member ID or user
	mechanism string // kindUser
	partition int32
}

var errBadKey = errors.New("not a key of this layout")

// parse takes apart a key under k.prefix.
func (k keys) parse(key string) (parsedKey, error) {
	rest, ok := strings.CutPrefix(key, k.prefix)
	if !ok {
		return parsedKey{}, errBadKey
	}
	if strings.HasPrefix(rest, metaDir) {
		return parsedKey{kind: kindMeta}, nil
	}
	if strings.HasPrefix(rest, aclsDir) {
		// Not a record: the authorizer's (acls.go), which loads them.
		return parsedKey{kind: kindACL}, nil
	}
	if name, ok := strings.CutPrefix(rest, topicsDir); ok {
		n, err := unescape(name)
		return parsedKey{kind: kindTopic, name: n}, err
	}
	if entry, ok := strings.CutPrefix(rest, logDir); ok {
		eg, ep, ok := strings.Cut(entry, "/")
		n, perr := strconv.ParseInt(ep, 10, 32)
		if !ok || perr != nil || len(ep) != 10 || n < 0 {
			return parsedKey{}, errBadKey
		}
		g, err := unescape(eg)
		return parsedKey{kind: kindLog, group: g, partition: int32(n)}, err
	}
	if entry, ok := strings.CutPrefix(rest, usersDir); ok {
		eu, mech, ok := strings.Cut(entry, "/")
		if !ok || !validMechanismKey(mech) {
			return parsedKey{}, errBadKey
		}
		u, err := unescape(eu)
		return parsedKey{kind: kindUser, name: u, mechanism: mech}, err
	}
	var p parsedKey
	if entry, ok := strings.CutPrefix(rest, shardsDir); ok {
		es, grest, ok := strings.Cut(entry, "/")
		n, err := strconv.ParseInt(es, 10, 32)
		// Only the canonical form, as for partitions.
		if !ok || err != nil || n < 0 || strconv.FormatInt(n, 10) != es {
			return parsedKey{}, errBadKey
		}
		p.sharded, p.shard, rest = true, int(n), grest
	}
	rest, ok = strings.CutPrefix(rest, groupsDir)
	if !ok {
		return parsedKey{}, errBadKey
	}
	eg, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return parsedKey{}, errBadKey
	}
	g, err := unescape(eg)
	if err != nil {
		return parsedKey{}, err
	}
	p.group = g
	switch {
	case rest == groupLeaf:
		p.kind = kindGroup
		return p, nil
	case strings.HasPrefix(rest, membersDir):
		p.kind = kindMember
		p.name, err = unescape(rest[len(membersDir):])
	case strings.HasPrefix(rest, assignDir):
		p.kind = kindAssignment
		p.name, err = unescape(rest[len(assignDir):])
	case strings.HasPrefix(rest, obatchDir):
		// A batch ID is the writing store's ID and a sequence number,
		// unreserved characters only (batchID), so it needs no escape.
		p.kind = kindOffsetBatch
		p.name = rest[len(obatchDir):]
		if p.name == "" || escapedLen(p.name) != len(p.name) {
			return parsedKey{}, errBadKey
		}
	case strings.HasPrefix(rest, offsetsDir):
		p.kind = kindOffset
		et, part, ok := strings.Cut(rest[len(offsetsDir):], "/")
		if !ok {
			return parsedKey{}, errBadKey
		}
		if p.name, err = unescape(et); err != nil {
			return parsedKey{}, err
		}
		n, perr := strconv.ParseInt(part, 10, 32)
		// Only the canonical form: the key of a partition is unique.
		if perr != nil || strconv.FormatInt(n, 10) != part {
			return parsedKey{}, errBadKey
		}
		p.partition = int32(n)
	default:
		return parsedKey{}, errBadKey
	}
	return p, err
}

// escape makes a name one key component: bytes other than ASCII letters,
// digits and "-._~" (RFC 3986's unreserved characters) become %XX with
// upper-case hex. '%' is escaped too, so the mapping is injective, and
// '/' is, so a component never holds one. Kafka's topic names and the
// member IDs of stock clients are all unreserved characters, so their keys
// read as the names do and sort as they do.
func escape(s string) string {
	n := escapedLen(s) - len(s)
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return string(b)
}

const upperHex = "0123456789ABCDEF"

// escapedLen is the length of escape(s).
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			n += 2
		}
	}
	return n
}

// escapeTo writes escape(s) to b.
func escapeTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
}

var errBadEscape = errors.New("not an escaped name")

// unescape inverts escape. It accepts only escape's own output, so that
// every name has exactly one key.
func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		for i := 0; i < len(s); i++ {
			if !unreserved(s[i]) {
				return "", errBadEscape
			}
		}
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case unreserved(c):
			b = append(b, c)
		case c == '%' && i+2 < len(s):
			hi, lo := unhex(s[i+1]), unhex(s[i+2])
			if hi < 0 || lo < 0 {
				return "", errBadEscape
			}
			d := byte(hi<<4 | lo)
			if unreserved(d) {
				return "", errBadEscape
			}
			b = append(b, d)
			i += 2
		default:
			return "", errBadEscape
		}
	}
	return string(b), nil
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
