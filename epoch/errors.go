package epoch

import "errors"

// Reasons a Learn's certificate is refused. They stay unexported: the machine
// drops a bad Learn silently (a forged or confused peer must not change our
// state), and the table tests match them with errors.Is.
var (
	errCertNumber   = errors.New("epoch: certificate's previous epoch is not epoch-1")
	errCertPrev     = errors.New("epoch: certificate was made in an epoch other than the one we know")
	errCertBallot   = errors.New("epoch: certificate has the zero ballot")
	errCertAcceptor = errors.New("epoch: certificate names an acceptor that is not a member (ID and store) of the previous epoch")
	errCertDup      = errors.New("epoch: certificate names an acceptor twice")
	errCertMajority = errors.New("epoch: certificate acceptors are not a majority of the previous epoch")
	errEpochShape   = errors.New("epoch: members are not sorted by unique node ID")
	errEpochOne     = errors.New("epoch: epoch 1 must have exactly the initial members of epoch 0")
)
