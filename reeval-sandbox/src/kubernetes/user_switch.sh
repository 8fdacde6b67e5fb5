u=${__ru%%:*}; g=; case $__ru in (*:*) g=${__ru#*:};; esac
num() { case $1 in (''|*[!0-9]*) return 1;; esac; }
ru=; rg=0; rn=
if [ -r /etc/passwd ]; then while IFS=: read -r a _ b c _ || [ -n "$a" ]; do
  if num "$u"; then [ "$b" = "$u" ]; else [ "$a" = "$u" ]; fi && { ru=$b; rg=$c; rn=$a; break; }
done </etc/passwd; fi
if [ -z "$ru" ]; then num "$u" || { echo "failed to run as user $u: the image's /etc/passwd has no such user" >&2; exit 1; }; ru=$u; fi
s=--clear-groups
if [ -n "$g" ]; then
  rg=; if [ -r /etc/group ]; then while IFS=: read -r a _ b _ || [ -n "$a" ]; do
    if num "$g"; then [ "$b" = "$g" ]; else [ "$a" = "$g" ]; fi && { rg=$b; break; }
  done </etc/group; fi
  if [ -z "$rg" ]; then num "$g" || { echo "failed to run as $__ru: the image's /etc/group has no group $g" >&2; exit 1; }; rg=$g; fi
elif [ -n "$rn" ] && [ -r /etc/group ]; then
  l=; while IFS=: read -r a _ b m || [ -n "$a" ]; do case ",$m," in (*",$rn,"*) l=$l${l:+,}$b;; esac; done </etc/group
  if [ -n "$l" ]; then s=--groups=$l; fi
fi
command -v setpriv >/dev/null 2>&1 || { echo "failed to run as $__ru: the image has no setpriv (util-linux's), which the Kubernetes backend switches users with" >&2; exit 1; }
echo "--reuid=$ru --regid=$rg $s"
