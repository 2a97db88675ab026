// Package suggest finds the name someone most likely meant: the "did you
// mean" of an error about an unknown key, endpoint or name. Its one function,
// Closest, is pure and safe for concurrent use.
package suggest

import "strings"

// Closest returns the candidate nearest to word by edit distance
// (insertions, deletions, substitutions and swaps of two neighbours), when
// it is near enough for the word's length to be a typo: none for words of
// one or two characters (any such word is one edit from many names), one
// edit for words of three or four that is not a substitution (a missing,
// extra or swapped letter: "asoc" for assoc, but not "sum" for num), two
// up to eight, else three. Case is ignored. Cost: O(len(word) ×
// len(candidate)) per candidate.
func Closest(word string, candidates []string) (string, bool) {
	w := strings.ToLower(word)
	n := len([]rune(w))
	limit := 1
	switch {
	case n <= 2:
		return "", false
	case n > 8:
		limit = 3
	case n > 4:
		limit = 2
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == word {
			continue
		}
		lc := strings.ToLower(c)
		d := distance(w, lc)
		if d < bestD && (n > 4 || !substitution(w, lc)) {
			best, bestD = c, d
		}
	}
	return best, best != ""
}

// substitution reports whether a and b, one edit apart, differ by a
// replaced character (rather than an inserted, deleted or swapped one).
func substitution(a, b string) bool {
	ra, rb := []rune(a), []rune(b)
	if len(ra) != len(rb) {
		return false
	}
	var diff []int
	for i := range ra {
		if ra[i] != rb[i] {
			diff = append(diff, i)
		}
	}
	swapped := len(diff) == 2 && diff[1] == diff[0]+1 && ra[diff[0]] == rb[diff[1]] && ra[diff[1]] == rb[diff[0]]
	return !swapped
}

// distance is the optimal-string-alignment distance between a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
