echo "setup ran in $(pwd)" > setup.log
