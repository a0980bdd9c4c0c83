package ovirtsim

import (
	"fmt"
	"slices"
	"strings"
)

// searchQuery is a parsed engine search expression: an OR of AND groups of
// `field=value` / `field!=value` clauses, optionally followed by
// `sortby field [asc|desc]`.
type searchQuery struct {
	groups   [][]clause
	sortBy   string
	sortDesc bool
}

type clause struct {
	field, value string
	neg          bool
	wildcard     bool
}

type searchTok struct {
	text   string
	quoted bool
	op     bool
}

func tokenizeSearch(q string) ([]searchTok, error) {
	var toks []searchTok
	i := 0
	for i < len(q) {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(q[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote at offset %d", i)
			}
			toks = append(toks, searchTok{text: q[i+1 : i+1+j], quoted: true})
			i += j + 2
		case c == '=':
			toks = append(toks, searchTok{text: "=", op: true})
			i++
		case c == '!' && i+1 < len(q) && q[i+1] == '=':
			toks = append(toks, searchTok{text: "!=", op: true})
			i += 2
		case c == '<' || c == '>':
			return nil, fmt.Errorf("operator %q is not supported by the simulator", c)
		default:
			j := i
			for j < len(q) && !strings.ContainsRune(" \t\n=!\"'<>", rune(q[j])) {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("unexpected %q at offset %d", c, i)
			}
			toks = append(toks, searchTok{text: q[i:j]})
			i = j
		}
	}
	return toks, nil
}

// parseSearch parses q for a collection whose searchable fields are fields.
func parseSearch(q, collection string, fields []string) (*searchQuery, *apiError) {
	bad := func(format string, args ...any) (*searchQuery, *apiError) {
		return nil, &apiError{400, reasonFailed, fmt.Sprintf("[Cannot search %s. Invalid search text '%s': %s.]",
			collection, q, fmt.Sprintf(format, args...))}
	}
	toks, err := tokenizeSearch(q)
	if err != nil {
		return bad("%v", err)
	}
	sq := &searchQuery{groups: [][]clause{nil}}
	for i := 0; i < len(toks); {
		t := toks[i]
		lower := strings.ToLower(t.text)
		switch {
		case !t.quoted && !t.op && lower == "and":
			i++
			continue
		case !t.quoted && !t.op && lower == "or":
			if len(sq.groups[len(sq.groups)-1]) == 0 {
				return bad("'or' without a preceding condition")
			}
			sq.groups = append(sq.groups, nil)
			i++
			continue
		case !t.quoted && !t.op && lower == "sortby":
			if i+1 >= len(toks) {
				return bad("sortby needs a field")
			}
			sq.sortBy = strings.ToLower(toks[i+1].text)
			if sq.sortBy != "name" {
				return bad("sortby %s is not supported (only name)", sq.sortBy)
			}
			i += 2
			if i < len(toks) {
				switch strings.ToLower(toks[i].text) {
				case "asc":
					i++
				case "desc":
					sq.sortDesc = true
					i++
				}
			}
			if i != len(toks) {
				return bad("unexpected text after sortby")
			}
			continue
		}
		if t.op || i+1 >= len(toks) || !toks[i+1].op {
			return bad("expected field=value near '%s'", t.text)
		}
		field := strings.ToLower(t.text)
		if !slices.Contains(fields, field) {
			return bad("unknown field '%s' (known: %s)", t.text, strings.Join(fields, ", "))
		}
		c := clause{field: field, neg: toks[i+1].text == "!="}
		if i+2 < len(toks) && !toks[i+2].op {
			v := toks[i+2]
			if !v.quoted && slices.Contains([]string{"and", "or", "sortby"}, strings.ToLower(v.text)) {
				return bad("missing value for '%s'", t.text)
			}
			c.value = v.text
			i += 3
		} else {
			i += 2 // field= with an empty value
		}
		c.wildcard = strings.Contains(c.value, "*")
		sq.groups[len(sq.groups)-1] = append(sq.groups[len(sq.groups)-1], c)
	}
	if len(sq.groups[len(sq.groups)-1]) == 0 && len(sq.groups) > 1 {
		return bad("'or' without a following condition")
	}
	return sq, nil
}

// exactName returns the value of a single positive, wildcard-free name clause
// when the whole query is just that (plus other AND clauses): the index fast path.
func (sq *searchQuery) exactName() (string, bool) {
	if sq == nil || len(sq.groups) != 1 {
		return "", false
	}
	for _, c := range sq.groups[0] {
		if c.field == "name" && !c.neg && !c.wildcard {
			return c.value, true
		}
	}
	return "", false
}

// match reports whether the object whose field values get returns matches.
func (sq *searchQuery) match(get func(field string) string, caseSensitive bool) bool {
	if sq == nil {
		return true
	}
	for _, g := range sq.groups {
		ok := true
		for _, c := range g {
			m := valueMatch(c.value, get(c.field), c.wildcard, caseSensitive)
			if m == c.neg {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func valueMatch(pattern, s string, wildcard, caseSensitive bool) bool {
	if !caseSensitive {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	if !wildcard {
		return pattern == s
	}
	return globMatch(pattern, s)
}

// globMatch matches s against a pattern in which '*' stands for any run of characters.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		k := strings.Index(s, p)
		if k < 0 {
			return false
		}
		s = s[k+len(p):]
	}
	if len(parts) == 1 {
		return s == ""
	}
	return strings.HasSuffix(s, last)
}
