"""The case, verdict and result model: what a case is, what it may conclude, and the record it
leaves; the documents and spec rules cases cite. Plain Python: no pytest, no wire."""
