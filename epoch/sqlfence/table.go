package sqlfence

import (
	"errors"
	"fmt"
	"strings"
)

// ErrTableName is returned by [New] for a table name it refuses; see the
// package doc for the rules.
var ErrTableName = errors.New("sqlfence: invalid table name")

// maxIdentLen is PostgreSQL's limit on identifiers (NAMEDATALEN - 1); longer
// names would be silently truncated, and two fences could then share a table
// by accident.
const maxIdentLen = 63

// quoteTable validates name (table or schema.table) and returns it quoted.
func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w %q: at most one dot (schema.table)", ErrTableName, name)
	}
	quoted := make([]string, len(parts))
	for i, part := range parts {
		if err := checkIdent(part); err != nil {
			return "", fmt.Errorf("%w %q: %s", ErrTableName, name, err)
		}
		quoted[i] = `"` + part + `"`
	}
	return strings.Join(quoted, "."), nil
}

// checkIdent accepts ASCII letters, digits and underscores, not starting with
// a digit: a name that needs no escaping inside double quotes and means the
// same thing to every client.
func checkIdent(s string) error {
	switch {
	case s == "":
		return errors.New("empty identifier")
	case len(s) > maxIdentLen:
		return fmt.Errorf("identifier longer than %d bytes", maxIdentLen)
	case s[0] >= '0' && s[0] <= '9':
		return errors.New("identifier starts with a digit")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return fmt.Errorf("byte %q at %d is not a letter, digit or underscore", c, i)
		}
	}
	return nil
}
