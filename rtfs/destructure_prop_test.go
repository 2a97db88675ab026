package rtfs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The bug class behind the empty-rest defect: sequential destructuring must
// agree with the first/next code it stands for. For generated vectors and
// lists and generated patterns [a0 .. ak & r], in let, in fn parameters and
// in loop, the bound values must equal (first xs), (first (next xs)), ...,
// and r must equal (next (next ... xs)) — nil when nothing is left.
func TestDestructuringMatchesFirstNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 42))
	for i := 0; i < 300; i++ {
		n, k := rng.IntN(6), rng.IntN(4)
		rest := rng.IntN(2) == 0
		elems := make([]string, n)
		for j := range elems {
			elems[j] = fmt.Sprint(rng.IntN(5))
		}
		coll := "[" + strings.Join(elems, " ") + "]"
		if rng.IntN(2) == 0 {
			coll = "'(" + strings.Join(elems, " ") + ")"
		}
		if n == 0 && rng.IntN(3) == 0 {
			coll = "nil"
		}
		var names, want []string
		expr := "xs"
		for j := 0; j < k; j++ {
			names = append(names, fmt.Sprintf("a%d", j))
			want = append(want, "(first "+expr+")")
			expr = "(next " + expr + ")"
		}
		pattern := strings.Join(names, " ")
		got := append([]string(nil), names...)
		if rest {
			pattern += " & r"
			got = append(got, "r")
			want = append(want, "(seq "+expr+")") // nthnext: (seq xs) when k is 0
		}
		vec := "[" + strings.Join(got, " ") + "]"
		wantVec := "[" + strings.Join(want, " ") + "]"
		for _, form := range []string{
			fmt.Sprintf("(let [[%s] xs] %s)", pattern, vec),
			fmt.Sprintf("(apply (fn [%s] %s) (if (nil? xs) [] xs))", pattern, vec),
			fmt.Sprintf("(loop [[%s] xs] %s)", pattern, vec),
		} {
			if strings.HasPrefix(form, "(apply") && (n < k || !rest && n != k) {
				continue // a fn refuses too few (or, without & r, too many) arguments, as in Clojure
			}
			src := fmt.Sprintf("(let [xs %s] (= %s %s))", coll, form, wantVec)
			p, err := Compile("prop.rtfs", []byte(src))
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			out, err := NewThread(Limits{}).Run(context.Background(), p)
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			if out.Value != True {
				t.Fatalf("destructuring disagrees with first/next:\n%s", src)
			}
		}
	}
}
