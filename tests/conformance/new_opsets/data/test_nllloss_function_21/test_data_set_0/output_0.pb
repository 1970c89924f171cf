ByJ=
L@