package ovirtsim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// searchQuery is a parsed engine search expression: an OR of AND groups of
// `field=value` / `field!=value` clauses, optionally followed by
// `sortby field [asc|desc]`, optionally followed by `page N`.
type searchQuery struct {
	groups   [][]clause
	sortBy   string
	sortDesc bool
	// paged tells that the query has a page clause, page is its number (0 selects nothing).
	paged bool
	page  int
	// empty is a search the Engine's SyntaxChecker refuses without saying so: SearchQuery logs
	// the syntax error and the list comes back empty (200). Only page clauses end up here; the
	// simulator answers its other syntax errors with a 400 fault (see parseSearch).
	empty bool
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
	// page marks the keyword page; end is the offset in the query right after it. The
	// tokenizer stops there: the Engine reads what follows character by character (pageNumber).
	page bool
	end  int
}

// tokenizeSearch splits q into tokens, up to and including a page keyword. Like the Engine's
// SyntaxChecker, which recognises PAGE as soon as the letters of a word outside a value spell
// it, any word that starts with "page" (any case) and is not a clause's value is the keyword.
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
			if j-i >= 4 && strings.EqualFold(q[i:i+4], "page") && (len(toks) == 0 || !toks[len(toks)-1].op) {
				return append(toks, searchTok{text: q[i : i+4], page: true, end: i + 4}), nil
			}
			toks = append(toks, searchTok{text: q[i:j]})
			i = j
		}
	}
	return toks, nil
}

// parseSearch parses q for a collection whose searchable fields are fields. A page clause is
// taken on Vms only (the other lists do not page: 400).
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
	// paging reads the page clause (the last token) where the Engine takes one, and ends the
	// parse; where it does not (after and/or, where it reads page as free text and the number
	// as a second one, or after a sort field without a direction) the list is empty.
	paging := func(t searchTok, allowed, afterDirection bool) (*searchQuery, *apiError) {
		if collection != "Vms" {
			return bad("page is simulated on Vms only")
		}
		var ok bool
		sq.paged = true
		sq.page, ok = pageNumber(q[t.end:], afterDirection)
		sq.empty = !allowed || !ok
		return sq, nil
	}
	for i := 0; i < len(toks); {
		t := toks[i]
		lower := strings.ToLower(t.text)
		switch {
		case t.page:
			afterAndOr := i > 0 && !toks[i-1].quoted && slices.Contains([]string{"and", "or"}, strings.ToLower(toks[i-1].text))
			return paging(t, !afterAndOr, false)
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
			if toks[i+1].page {
				return paging(toks[i+1], false, false) // INVALID_SORT_FIELD
			}
			sq.sortBy = strings.ToLower(toks[i+1].text)
			if sq.sortBy != "name" {
				return bad("sortby %s is not supported (only name)", sq.sortBy)
			}
			i += 2
			direction := false
			if i < len(toks) {
				switch strings.ToLower(toks[i].text) {
				case "asc":
					direction = true
				case "desc":
					direction, sq.sortDesc = true, true
				}
			}
			if direction {
				i++
			}
			if i < len(toks) && toks[i].page {
				// Only SORT_DIRECTION may come before PAGE: `sortby name page 2` is
				// INVALID_SORT_DIRECTION.
				return paging(toks[i], direction, direction)
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

// pageNumber reads what follows the keyword page the way the Engine's SyntaxChecker does (state
// PAGE, then PAGE_VALUE): spaces are skipped; the first character must be a digit
// (INVALID_CHARECTER otherwise); the value is the run of digits plus the one character after it,
// and the character after that is skipped; anything but spaces after it is
// NOTHING_COMES_AFTER_PAGE_VALUE. A value that is not an int (a trailing character, an
// overflow) is page 1 (getPagePhrase). No value at all is page 1 after a sort direction, and an
// invalid search elsewhere. ok false means the Engine's search fails (an empty list).
func pageNumber(rest string, afterDirection bool) (page int, ok bool) {
	rest = strings.TrimLeft(rest, " ")
	if rest == "" {
		return 1, afterDirection
	}
	if !isDigit(rest[0]) {
		return 0, false
	}
	n := 0
	for n < len(rest)-1 && isDigit(rest[n]) {
		n++
	}
	if n+2 < len(rest) && strings.Trim(rest[n+2:], " ") != "" {
		return 0, false
	}
	v, err := strconv.ParseInt(rest[:n+1], 10, 32)
	if err != nil {
		return 1, true
	}
	return int(v), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// window returns the rows of the ordered result l that the page clause selects, then limits
// them to max (-1: no max), as the Engine's search does: ROW_NUMBER() OVER (ORDER BY ...) BETWEEN
// (page-1)*max+1 AND page*max (DBPagingType Range), with max Integer.MAX_VALUE when absent.
// Page 0 selects nothing; so does any page past the first without max.
func window[T any](l []T, sq *searchQuery, maxRows int) []T {
	if sq == nil || !sq.paged {
		return limit(l, maxRows)
	}
	size := int64(math.MaxInt32)
	if maxRows >= 0 {
		size = min(int64(maxRows), size)
	}
	lo := (int64(sq.page) - 1) * size
	if sq.page < 1 || lo >= int64(len(l)) {
		return l[:0]
	}
	return l[lo:min(lo+size, int64(len(l)))]
}

// match reports whether the object whose field values get returns matches.
func (sq *searchQuery) match(get func(field string) string, caseSensitive bool) bool {
	return sq.matchWith(get, nil, caseSensitive)
}

// matchWith is match where custom, when not nil, decides the clauses it handles (handled true),
// e.g. a field with several values such as a VM's tags (vmtags.go).
func (sq *searchQuery) matchWith(get func(field string) string, custom func(c clause) (matched, handled bool), caseSensitive bool) bool {
	if sq == nil {
		return true
	}
	if sq.empty {
		return false
	}
	for _, g := range sq.groups {
		ok := true
		for _, c := range g {
			var m, handled bool
			if custom != nil {
				m, handled = custom(c)
			}
			if !handled {
				m = valueMatch(c.value, get(c.field), c.wildcard, caseSensitive)
			}
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
