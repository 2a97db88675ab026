// Package suggest finds the name someone most likely meant: the "did you
// mean" of an error about an unknown key, endpoint or name. Its one function,
// Closest, is pure and safe for concurrent use.
package suggest

import "strings"

// Closest returns the candidate nearest to word by edit distance
// (insertions, deletions, substitutions and swaps of two neighbours), when
// it is near enough to be a typo: at most 1 edit for words up to 4 bytes, 2
// up to 8, else 3. Case is ignored. Cost: O(len(word) × len(candidate)) per
// candidate.
func Closest(word string, candidates []string) (string, bool) {
	w := strings.ToLower(word)
	limit := 1
	switch {
	case len(w) > 8:
		limit = 3
	case len(w) > 4:
		limit = 2
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == word {
			continue
		}
		if d := distance(w, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best, best != ""
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
