// A PDL pattern whose rewrite matches its own root again: neg(x) -> neg(x).
module {
  pdl.pattern @neg_forever : benefit(1) {
    %t = pdl.type
    %x = pdl.operand
    %neg = pdl.operation "lazy.neg"(%x : !pdl.value) -> (%t : !pdl.type)
    pdl.rewrite %neg {
      %again = pdl.operation "lazy.neg"(%x : !pdl.value) -> (%t : !pdl.type)
      pdl.replace %neg with %again
    }
  }
}
