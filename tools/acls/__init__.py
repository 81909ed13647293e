"""`groupshift acls`: kafka-acls.sh's --add / --remove / --list, speaking CreateAcls, DeleteAcls
and DescribeAcls (issue 26)."""
