# What this build is and which devices it sees.
"$LACUNA" info
