package rtfs

import (
	"sort"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// Forms returns the special forms and built-in macros (let, defn, try,
// call, ->> ...) with their usage and a line of doc, sorted by name: the
// part of the language Universe does not list because they are not
// functions. The result is the caller's.
func Forms() []FuncDoc {
	names := append(compile.Forms(), "catch", "finally") // the clauses of try
	sort.Strings(names)
	out := make([]FuncDoc, 0, len(names))
	for _, n := range names {
		d := FuncDoc{Name: n}
		if e, ok := formDocs[n]; ok {
			d.Usage, d.Doc = e[0], e[1]
		}
		out = append(out, d)
	}
	return out
}

// LookupForm returns the FuncDoc of the special form or macro called name.
func LookupForm(name string) (FuncDoc, bool) {
	for _, d := range Forms() {
		if d.Name == name {
			return d, true
		}
	}
	return FuncDoc{}, false
}

// formDocs holds the usage and doc of each special form and macro
// (compile.Forms); a test keeps them in step.
var formDocs = map[string][2]string{
	"->":           {"(-> x (f a) g ...)", "threads x as the first argument through each form"},
	"->>":          {"(->> x (f a) g ...)", "threads x as the last argument through each form"},
	"and":          {"(and x ...)", "the first falsy x, else the last (true when none)"},
	"as->":         {"(as-> x name forms...)", "threads x through forms that name it"},
	"assert":       {"(assert test message?)", "throws \"Assert failed: ...\" (an AssertionError) when test is false or nil"},
	"call":         {"(call :capability args...)", "a host call: suspends the run until the host answers (rtfshost doc lists the host's capabilities)"},
	"catch":        {"(catch Class e body...) (catch :type e body...) (catch e body...)", "a clause of try: handles the errors of Class (Exception catches all; ArithmeticException, ExceptionInfo ...), of :type, or all; e is the error map {:type :error :message .. :kind ..}"},
	"finally":      {"(finally body...)", "the last clause of try: runs whether or not an error was raised"},
	"case":         {"(case e k r (k1 k2) r ... default?)", "the result of the constant equal to e (not evaluated); no match and no default is an error"},
	"cond":         {"(cond test expr ... :else expr)", "the expr of the first truthy test, else nil"},
	"cond->":       {"(cond-> x test form ...)", "threads x (first argument) through each form whose test holds"},
	"cond->>":      {"(cond->> x test form ...)", "threads x (last argument) through each form whose test holds"},
	"condp":        {"(condp pred e test r ... default?)", "the r of the first (pred test e) that holds"},
	"declare":      {"(declare name ...)", "names globals defined later (a program's functions may use them anyway); nil"},
	"def":          {"(def name :type? value)", "defines a global"},
	"defn":         {"(defn name [params] body...) (defn name ([params] body...) ...)", "defines a global function (one or several arities; & rest; destructuring; :type annotations)"},
	"defn-":        {"(defn- name [params] body...)", "defn (RTFS has no namespaces, so nothing is private)"},
	"do":           {"(do expr ...)", "evaluates each expr, the value of the last"},
	"doseq":        {"(doseq [x coll ...] body...)", "runs body for each binding, as for does; nil"},
	"dotimes":      {"(dotimes [i n] body...)", "runs body with i from 0 to n-1; nil"},
	"fn":           {"(fn name? [params] body...) (fn name? ([params] body...) ...)", "a function; #(... % %2) is a short form"},
	"for":          {"(for [x coll :when t :while t :let [..] y coll2] body)", "vector of body for each combination of the bindings"},
	"if":           {"(if test then else?)", "then when test is truthy (not nil or false), else else"},
	"if-let":       {"(if-let [binding test] then else?)", "then with binding bound when test is truthy, else else"},
	"if-not":       {"(if-not test then else?)", "(if test else then)"},
	"if-some":      {"(if-some [binding e] then else?)", "then with binding bound when e is not nil (false counts)"},
	"lazy-cat":     {"(lazy-cat coll ...)", "(concat (lazy-seq coll) ...)"},
	"ns":           {"(ns name (:require [clojure.string :as str :refer [join]] ...))", "names clojure.string, clojure.set and clojure.math by the aliases and bare names asked for, from there on; nil"},
	"require":      {"(require '[clojure.math :as math] ...)", "as ns's :require"},
	"with-out-str": {"(with-out-str body...)", "the text print, println and prn write while body runs, as a string (instead of the log); a host call inside it is an error"},
	"lazy-seq":     {"(lazy-seq body...)", "the lazy sequence of body's value, computed when an element is needed"},
	"let":          {"(let [name value ...] body...)", "binds names (or destructuring patterns) in order, then evaluates body"},
	"letfn":        {"(letfn [(f [x] ...) ...] body...)", "local functions that may call each other"},
	"loop":         {"(loop [name value ...] body...)", "a let that recur jumps back to, in constant stack"},
	"match":        {"(match e pattern result ...)", "the result of the first pattern e matches (literals, _, names, [a & r], {:k p}, :when guards)"},
	"mcp-stream":   {"(mcp-stream endpoint config? processor initial-state?)", "(call :mcp.stream.start {...}) with those keys"},
	"or":           {"(or x ...)", "the first truthy x, else the last (nil when none)"},
	"quote":        {"(quote form) 'form", "form itself, not evaluated"},
	"recur":        {"(recur args...)", "jumps to the enclosing loop or fn with new values (tail position only)"},
	"some->":       {"(some-> x f ...)", "-> that stops at nil"},
	"some->>":      {"(some->> x f ...)", "->> that stops at nil"},
	"throw":        {"(throw value)", "raises value as an error; (throw (ex-info msg data)) is the usual one"},
	"try":          {"(try body... (catch Class e handler...) ... (finally cleanup...))", "handles errors: catch by class (Exception, ExceptionInfo, ArithmeticException...), keyword or :type; finally always runs"},
	"when":         {"(when test body...)", "body when test is truthy, else nil"},
	"when-first":   {"(when-first [x coll] body...)", "body with x bound to coll's first element, when it has one"},
	"when-let":     {"(when-let [binding test] body...)", "body with binding bound when test is truthy"},
	"when-not":     {"(when-not test body...)", "body when test is falsy"},
	"when-some":    {"(when-some [binding e] body...)", "body with binding bound when e is not nil"},
	"λ":            {"(λ [params] body...)", "fn"},
}
